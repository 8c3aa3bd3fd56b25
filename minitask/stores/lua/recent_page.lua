-- recent_page: the newest entries of a queue's record of recent outcomes (STREAM),
-- each sent only if its packed entry (field e) is no longer than a writer makes one:
-- a longer one (no minitask wrote it) is sent as its length (20 planted entries of
-- 10 MB made each /recent view and `minitask inspect recent` read 200 MB).
-- KEYS[1] recent (STREAM)
-- ARGV[1] entries at most   ARGV[2] the most bytes an entry sent may have
-- Returns: {1, entries newest first, each {ID, entry} or {ID, false, its length}
--   (false alone: no field e)}, or {0, Redis's refusal} for a key of another type
-- Invariant: reads only.
local reply = redis.pcall('XREVRANGE', KEYS[1], '+', '-', 'COUNT', ARGV[1])
if type(reply) == 'table' and reply.err then return {0, reply.err} end
local most = tonumber(ARGV[2])
local entries = {}
for i, entry in ipairs(reply) do
  local fields, body = entry[2], false
  for j = 1, #fields, 2 do
    if fields[j] == 'e' then body = fields[j + 1] end
  end
  if body and #body > most then
    entries[i] = {entry[1], false, #body}
  else
    entries[i] = {entry[1], body}
  end
end
return {1, entries}
