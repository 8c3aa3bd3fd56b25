-- broadcast_send: add calls to a queue's broadcast log for every subscriber, and
-- wake an idle worker of each.
-- KEYS[1..5] as broadcast_lib.lua   KEYS[6] bcast:names (HASH)   KEYS[7] bcast:joins (ZSET)
-- KEYS[7 + i] the wake list of the i-th subscriber's lane, in ARGV's order
-- ARGV[1] now (ms)   ARGV[2] broadcast_maxlen (calls)   ARGV[3] broadcast_ttl (ms),
--   both kept in state (maxlen, ttl) for pulls
-- ARGV[4] wake cap   ARGV[5] batch limit for drops   ARGV[6] n, the subscribers
-- the caller knows of, then their n names, sorted; then per call: id, encoded message
-- Returns: {1, calls added} (an id sent already is left as it is), or, when the
-- subscribers are not the ones the caller knows of, {0, the subscribers} and
-- nothing is changed: the caller sends again with those.
-- Invariant: a call in the log is pulled by each subscriber recorded with it (or
-- dropped over maxlen / ttl); names keeps who that was, for join(). Log, names
-- and joins hold at most maxlen calls when it returns, however many it carried.
-- Data minitask did not write (lib.lua): cursors, state, log, bodies, sent, names or joins
-- of another type refuses the call before any write; a sequence that is no number, or
-- is below a cursor or a logged call, starts again above every cursor and logged call
-- (so no subscriber takes the next call for one it pulled already); a wake list of
-- another type gets no token.
local now, maxlen, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local cap, limit, n = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local current = guards().must('hash', 'HKEYS', KEYS[5])
table.sort(current)
local same = #current == n
for i = 1, n do
  if not same then break end
  same = current[i] == ARGV[6 + i]
end
if not same then return {0, current} end
guards().expect(KEYS[1], 'hash')
guards().expect(KEYS[2], 'zset')
guards().expect(KEYS[3], 'hash')
guards().expect(KEYS[4], 'hash')
guards().expect(KEYS[6], 'hash')
guards().expect(KEYS[7], 'zset')
-- the sequence is above every cursor and every call logged: one that is no number, or
-- one below them (set back by hand, or planted), starts again above them all, so that
-- no subscriber takes the next call for one it pulled already (it would never run)
local seq_now = redis.call('HGET', KEYS[1], 'seq')
if seq_now then
  local top = 0
  for _, cursor in ipairs(redis.call('HVALS', KEYS[5])) do
    top = math.max(top, guards().whole(cursor, 0, MAX_SCORE) or 0)
  end
  for _, key in ipairs({KEYS[2], KEYS[7]}) do
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    top = math.max(top, guards().whole(last[2], 0, MAX_SCORE) or 0)
  end
  local held = guards().whole(seq_now, 0, MAX_SCORE)
  if not held or held < top then
    redis.call('HSET', KEYS[1], 'seq', top)
    redis.log(redis.LOG_WARNING, 'minitask: ' .. KEYS[1] .. ' seq held no call sequence ' ..
              'above every cursor and logged call; started again at ' .. top)
  end
end
local joined = table.concat(current, '\n')
local added = 0
for i = 7 + n, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HSETNX', KEYS[6], id, joined) == 1 then
    local seq = guards().bump(KEYS[1], 'seq', 1)
    redis.call('ZADD', KEYS[7], seq, id)
    if n > 0 then  -- with no subscriber, nobody would ever pull it
      redis.call('ZADD', KEYS[2], seq, id)
      redis.call('HSET', KEYS[3], id, ARGV[i + 1])
      redis.call('HSET', KEYS[4], id, now)
    end
    added = added + 1
  end
end
-- the sender's limits, for the pull of a subscriber coming back after no send
if added > 0 then redis.call('HSET', KEYS[1], 'maxlen', ARGV[2], 'ttl', ARGV[3]) end
-- a send drops as many calls as it added, and a batch more: however many calls
-- one send carries, the log is back within maxlen when it returns
drop_over(now, maxlen, ttl, limit + added)
drop_pulled(limit)
-- join() reads the subscribers of the last maxlen calls at most
local extra = tonumber(redis.call('ZCARD', KEYS[7])) - maxlen
if extra > 0 then
  local ids = redis.call('ZRANGE', KEYS[7], 0, math.min(extra, limit + added) - 1)
  per_thousand('ZREM', KEYS[7], ids)
  per_thousand('HDEL', KEYS[6], ids)
end
if added > 0 and n > 0 then
  local tokens = {}
  for i = 1, math.min(added, cap) do tokens[i] = '1' end
  for i = 1, n do
    local kept = tolerant(0, 'RPUSH', KEYS[7 + i], unpack(tokens))
    if kept > cap then redis.call('LTRIM', KEYS[7 + i], 0, cap - 1) end
  end
end
return {1, added}
