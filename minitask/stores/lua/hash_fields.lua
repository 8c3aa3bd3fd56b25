-- hash_fields: fields of hashes, each sent only when it is no longer than minitask
-- writes there: a longer one (no minitask wrote it) is measured (HSTRLEN, O(1)) and
-- never read (a planted 20 MB message or record was read whole by every look at its
-- task: minitask inspect ID, the task page, a cancel, dead show).
-- KEYS[i] a hash   ARGV[2i - 1] its field   ARGV[2i] the most bytes sent
-- Returns: for each key, the value; false when there is no such field; {its length}
--   when it is longer; {-1} when the key holds another type.
-- Invariant: reads only.
local found = {}
for i, key in ipairs(KEYS) do
  local field = ARGV[2 * i - 1]
  local length = redis.pcall('HSTRLEN', key, field)
  if type(length) == 'table' and length.err then
    guards().foreign(length)  -- raises any other error
    found[i] = {-1}
  elseif length > tonumber(ARGV[2 * i]) then
    found[i] = {length}
  else
    found[i] = redis.call('HGET', key, field)
  end
end
return found
