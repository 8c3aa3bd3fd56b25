-- broadcast_page: one bounded page of a broadcast queue's subscribers, for the
-- listings (stores/broadcast_reads.py): names only, each no longer than a name can
-- be; a longer member or field (no minitask wrote it; planted: 50 MB, read by every
-- `minitask status`) is removed (lib.lua's bounded_members: ZREM, or HDEL of a
-- cursors field), never sent, so that it costs one call, not every listing.
-- KEYS[1] bcast:cursors (HASH) for 'fields'; a ZSET (places, since) otherwise
-- ARGV[1] 'fields': one HSCAN page of the cursors, from the cursor ARGV[2], COUNT
--   ARGV[3]; a cursor value longer than any minitask writes (ARGV[5]; planted: 50 MB)
--   is set to 0, as broadcast_lib's cursor_of does, said once in Redis's log: HSCAN
--   copies values, and it is not copied at the next listing (its subscriber restarts
--   from the oldest call still logged, at least once)
-- ARGV[1] 'rank': ZRANGE ARGV[2] ARGV[3] (ranks)
-- ARGV[1] 'below': ZRANGEBYSCORE -inf (ARGV[2] LIMIT 0 ARGV[3]
-- ARGV[1] 'scored': ZRANGE ARGV[2] ARGV[3] WITHSCORES: name, score, name, ...
-- ARGV[4] the most bytes of a name minitask writes
-- Returns: {the next HSCAN cursor ('0' but for 'fields'), the names sent, the lengths
--   of the members or fields removed}; {'foreign', Redis's error} when the key holds
--   another type. Invariant: writes nothing else.
local mode, most = ARGV[1], tonumber(ARGV[4])
local reply
if mode == 'fields' then
  reply = redis.pcall('HSCAN', KEYS[1], ARGV[2], 'COUNT', ARGV[3])
elseif mode == 'rank' then
  reply = redis.pcall('ZRANGE', KEYS[1], ARGV[2], ARGV[3])
elseif mode == 'scored' then
  reply = redis.pcall('ZRANGE', KEYS[1], ARGV[2], ARGV[3], 'WITHSCORES')
else
  reply = redis.pcall('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, ARGV[3])
end
if type(reply) == 'table' and reply.err then
  guards().foreign(reply)  -- raises any other error
  return {'foreign', reply.err}
end
local removed = {}
if mode == 'scored' then
  return {'0', bounded_members(KEYS[1], reply, 2, most, removed), removed}
elseif mode ~= 'fields' then
  return {'0', bounded_members(KEYS[1], reply, 1, most, removed), removed}
end
local value_most = tonumber(ARGV[5])
local fields = bounded_members(KEYS[1], reply[2], 2, most, removed, 'HDEL')
local sent = {}
for i = 1, #fields, 2 do
  local name, value = fields[i], fields[i + 1]
  sent[#sent + 1] = name
  if #value > value_most then
    redis.call('HSET', KEYS[1], name, '0')
    redis.log(redis.LOG_WARNING, (string.gsub(
      'minitask: set the cursor of ' .. string.sub(name, 1, 64) .. ' in ' .. KEYS[1] .. ', '
      .. #value .. ' bytes long, to 0: no call sequence; that subscriber restarts from the'
      .. ' oldest call still logged', '[^ -~]',
      function(byte) return string.format('\\x%02x', string.byte(byte)) end)))
  end
end
return {reply[1], sent, removed}
