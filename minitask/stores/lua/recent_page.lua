-- recent_page: the newest entries of a queue's record of recent outcomes (STREAM),
-- each sent only if it is no longer than a writer makes one: a longer one (no
-- minitask wrote it: its fields and values together over ARGV[2] bytes) is removed
-- (XDEL) and sent as its length, so that it costs one listing, not every listing
-- until the record is trimmed past it (20 planted entries of 10 MB made each /recent
-- view and `minitask inspect recent` read 200 MB; then, kept, cost Redis 0.2-0.4 s a
-- listing to read).
-- KEYS[1] recent (STREAM)
-- ARGV[1] entries at most   ARGV[2] the most bytes an entry sent may have
-- ARGV[3] the reading app's own recent_outcomes (0: none)   ARGV[4] the most any app keeps
-- Shows no more than the record's cap: its writers trim it about (MAXLEN ~, lib.lua's
-- remember), so it may hold up to a stream node more than the newest entry's field n
-- (the writer's recent_outcomes); an entry with no such field (an older minitask's,
-- trimmed exactly, or planted) caps nothing. The reading app's own recent_outcomes
-- (ARGV[3]) is the cap where it keeps a record: an n, which any program may write, moves
-- no listing (a planted n of 1 hid all but the newest outcome; one past the app's
-- cap showed past it). Read only by an app that keeps none (ARGV[3] 0), and then
-- only a whole number from 1 to ARGV[4] (text, -5, 1.5, 1e300 cap nothing).
-- Returns: {1, entries newest first, each {ID, field e} or {ID, false, its length,
--   1 when it was removed} (false alone: no field e)}, or {0, Redis's refusal} for a
--   key of another type
-- Invariant: writes nothing but those removals. One Redis refuses (a replica, a full
-- one) leaves the entry in place, still never sent.
local reply = redis.pcall('XREVRANGE', KEYS[1], '+', '-', 'COUNT', ARGV[1])
if type(reply) == 'table' and reply.err then return {0, reply.err} end
local most, shown = tonumber(ARGV[2]), #reply
local own, ceiling = tonumber(ARGV[3]), tonumber(ARGV[4])
local cap = own > 0 and own or nil
if not cap and reply[1] then
  local fields = reply[1][2]
  for j = 1, #fields, 2 do
    if fields[j] == 'n' then
      local n = tonumber(fields[j + 1])
      if n and n >= 1 and n <= ceiling and n == math.floor(n) then cap = n end
    end
  end
end
if cap and cap < shown then shown = cap end
local entries = {}
for i = 1, shown do
  local entry = reply[i]
  local fields, body, size = entry[2], false, 0
  for j = 1, #fields, 2 do
    size = size + #fields[j] + #fields[j + 1]
    if fields[j] == 'e' then body = fields[j + 1] end
  end
  if size > most then
    local gone = redis.pcall('XDEL', KEYS[1], entry[1])
    entries[i] = {entry[1], false, size, (type(gone) == 'table' and gone.err) and 0 or 1}
  else
    entries[i] = {entry[1], body}
  end
end
return {1, entries}
