-- recent_page: the newest entries of a queue's record of recent outcomes (STREAM),
-- each sent only if it is no longer than a writer makes one: a longer one (no
-- minitask wrote it: its fields and values together over ARGV[2] bytes) is removed
-- (XDEL) and sent as its length, so that it costs one listing, not every listing
-- until the record is trimmed past it (20 planted entries of 10 MB made each /recent
-- view and `minitask inspect recent` read 200 MB; then, kept, cost Redis 0.2-0.4 s a
-- listing to read).
-- KEYS[1] recent (STREAM)
-- ARGV[1] entries at most   ARGV[2] the most bytes an entry sent may have
-- Shows no more than the record's cap: its writers trim it about (MAXLEN ~, lib.lua's
-- remember), so it may hold up to a stream node more than the newest entry's field n
-- (the writer's recent_outcomes); an entry with no such field (an older minitask's,
-- trimmed exactly, or planted) caps nothing.
-- Returns: {1, entries newest first, each {ID, field e} or {ID, false, its length,
--   1 when it was removed} (false alone: no field e)}, or {0, Redis's refusal} for a
--   key of another type
-- Invariant: writes nothing but those removals. One Redis refuses (a replica, a full
-- one) leaves the entry in place, still never sent.
local reply = redis.pcall('XREVRANGE', KEYS[1], '+', '-', 'COUNT', ARGV[1])
if type(reply) == 'table' and reply.err then return {0, reply.err} end
local most, shown = tonumber(ARGV[2]), #reply
if reply[1] then
  local fields = reply[1][2]
  for j = 1, #fields, 2 do
    if fields[j] == 'n' then
      local cap = tonumber(fields[j + 1])
      if cap and cap >= 1 and cap < shown and cap == math.floor(cap) then shown = cap end
    end
  end
end
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
