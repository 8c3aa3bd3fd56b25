-- enqueue: store messages and make them ready now or due later, atomically.
-- Runs after promote.lua (prepended by stores/scripts.py): due delayed tasks go first.
-- KEYS[1] messages (HASH)   KEYS[2] delayed (ZSET)   KEYS[3] wake (LIST)
-- KEYS[4..13] ready lists, priority 9 first (KEYS[13 - p] holds priority p)
-- KEYS[14] order (HASH)   KEYS[15] sequence (STRING)
-- KEYS[15 + n] result (LIST) of the n-th message
-- ARGV[1] now (ms)   ARGV[2] wake cap (tokens kept at most)   ARGV[3] promotion limit
-- then per message, four ARGVs: id, encoded message, priority (0..9), due (ms; <= now: ready)
-- Returns: the number of messages added (an id already pending is left as it is).
-- Invariant: every id in a ready list or in delayed has its message in messages,
-- unless it was cancelled (then fetch skips the stale entry); a result left by an
-- earlier run of the same id is gone once the id is pending again.
local now = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
promote_due(KEYS[2], KEYS[14], 4, now, tonumber(ARGV[3]))
local added, wake = 0, 0
for i = 4, #ARGV, 4 do
  local id, body = ARGV[i], ARGV[i + 1]
  local priority, due = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  if redis.call('HSETNX', KEYS[1], id, body) == 1 then
    added = added + 1
    redis.call('DEL', KEYS[15 + i / 4])
    if due > now then
      redis.call('ZADD', KEYS[2], string.format('%.0f', due * 10 + 9 - priority), id)
      redis.call('HSET', KEYS[14], id, redis.call('INCR', KEYS[15]))
      -- wake sleepers only when this task is due before everything else delayed
      if redis.call('ZRANGE', KEYS[2], 0, 0)[1] == id then wake = wake + 1 end
    else
      redis.call('RPUSH', KEYS[13 - priority], id)
      wake = wake + 1
    end
  end
end
if wake > 0 then
  if wake > cap then wake = cap end
  local tokens = {}
  for i = 1, wake do tokens[i] = '1' end
  if redis.call('RPUSH', KEYS[3], unpack(tokens)) > cap then
    redis.call('LTRIM', KEYS[3], 0, cap - 1)
  end
end
return added
