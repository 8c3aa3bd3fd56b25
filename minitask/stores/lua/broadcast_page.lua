-- broadcast_page: one bounded page of a broadcast queue's subscribers, for the
-- listings (stores/broadcast_reads.py): names only, each no longer than a name can
-- be; a longer member or field (no minitask wrote it) is counted, never sent.
-- KEYS[1] bcast:cursors (HASH) for 'fields'; a ZSET (places, since) otherwise
-- ARGV[1] 'fields': one HSCAN page of the cursors, from the cursor ARGV[2], COUNT
--   ARGV[3]; a cursor value longer than any minitask writes (ARGV[5]; planted: 50 MB)
--   is set to 0, as broadcast_lib's cursor_of does, said once in Redis's log: HSCAN
--   copies values, and it is not copied at the next listing (its subscriber restarts
--   from the oldest call still logged, at least once); a field longer than a name
--   is deleted (no subscriber has it), said in Redis's log.
-- ARGV[1] 'rank': ZRANGE ARGV[2] ARGV[3] (ranks)
-- ARGV[1] 'below': ZRANGEBYSCORE -inf (ARGV[2] LIMIT 0 ARGV[3]
-- ARGV[1] 'scored': ZRANGE ARGV[2] ARGV[3] WITHSCORES: name, score, name, ...
-- ARGV[4] the most bytes of a name sent
-- Returns: {the next HSCAN cursor ('0' but for 'fields'), the names sent, how many
--   were longer}; {'foreign', Redis's error} when the key holds another type.
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
local sent, longer = {}, 0
if mode == 'scored' then
  for i = 1, #reply, 2 do
    if #reply[i] <= most then
      sent[#sent + 1] = reply[i]
      sent[#sent + 1] = reply[i + 1]
    else
      longer = longer + 1
    end
  end
  return {'0', sent, longer}
elseif mode ~= 'fields' then
  for _, member in ipairs(reply) do
    if #member <= most then sent[#sent + 1] = member else longer = longer + 1 end
  end
  return {'0', sent, longer}
end
local value_most = tonumber(ARGV[5])
local fields = reply[2]
for i = 1, #fields, 2 do
  local name, value = fields[i], fields[i + 1]
  if #name <= most then
    sent[#sent + 1] = name
    if #value > value_most then
      redis.call('HSET', KEYS[1], name, '0')
      redis.log(redis.LOG_WARNING, (string.gsub(
        'minitask: set the cursor of ' .. string.sub(name, 1, 64) .. ' in ' .. KEYS[1] .. ', '
        .. #value .. ' bytes long, to 0: no call sequence; that subscriber restarts from the'
        .. ' oldest call still logged', '[^ -~]',
        function(byte) return string.format('\\x%02x', string.byte(byte)) end)))
    end
  else
    -- no subscriber's name (none is so long): deleted, not copied again
    redis.call('HDEL', KEYS[1], name)
    longer = longer + 1
  end
end
if longer > 0 then
  redis.log(redis.LOG_WARNING, 'minitask: deleted ' .. longer .. ' field(s) of ' .. KEYS[1] ..
            ' longer than any subscriber name (' .. most .. ' bytes)')
end
return {reply[1], sent, longer}
