-- bury: move a task to the dead letters, keeping its message for inspection.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] dead (ZSET)
-- KEYS[7] dead_info (HASH)   KEYS[8] result (LIST)   KEYS[9] order (HASH)
-- KEYS[10] flow (HASH)   KEYS[11] flow_due (ZSET)   KEYS[12] the flow prefix (flow.lua)
-- KEYS[13] wake (LIST)   KEYS[14] flow_dead (HASH)
-- KEYS[15] recent (STREAM): the queue's record of recent outcomes (lib.lua's remember)
-- KEYS[16] dead_trimmed (STRING): how many dead letters the bounds below deleted, in all
-- ARGV[1] id   ARGV[2] now (ms)   ARGV[3] encoded outcome (why it died)
-- ARGV[4] result ttl (ms; 0: keep no result)
-- ARGV[5] the record's length   ARGV[6] the task's entry in it ('': none)
-- ARGV[7] dead_letters_max: the most dead letters the queue keeps (>= 1)
-- ARGV[8] dead_letters_ttl (ms; 0: no age limit)   ARGV[9] the most deleted per call
-- Returns: {1, deleted} when the task was leased or delayed here and is now dead
-- (deleted: how many of the oldest dead letters the bounds deleted), {0, 0} when it
-- was not (someone else holds it now and decides its fate).
-- Bounds: before the task joins dead, the oldest dead letters go, those over
-- dead_letters_max (room kept for this one) and those older than dead_letters_ttl,
-- at most ARGV[9] a call (a lowered max converges over the next calls), each with
-- all purge_dead.lua deletes (its dead entry, dead_info, message and flow_dead
-- spec), and their number is added to dead_trimmed first (never deleted silently).
-- Every command they use is one this script needs anyway (ZREM, HDEL) or reads,
-- but for INCRBY (and SET, for a count no minitask wrote), which comes first: refused,
-- nothing was deleted. The buried id itself is never one of them.
-- Data minitask did not write (lib.lua): every key the call writes (leases, delayed,
-- deliveries, retrying, dead, dead_info, order, flow_dead, recent, the flow keys)
-- that holds another type is moved aside to `key`:foreign first (lib.lua's aside()),
-- so the dead letter is always recorded: leases or delayed of another type count as
-- empty then. A result key is replaced whole.
-- The lease (or delayed entry) is removed last, after every other write: Redis keeps
-- the writes a script made before a refusal (an ACL changed while the worker runs:
-- NOPERM), and what is left brings the task back (at least once); removed first, a
-- refusal after it lost the task. The task joins dead just before that, once its
-- reason (dead_info), result and record are written: refused before, it is not seen
-- dead with an empty reason (`dead list`), nor requeued by `dead requeue` while the
-- worker's retried bury would dead-letter it again.
local id = ARGV[1]
local trimmed = 0
guards().settle(KEYS[1], 'zset')
guards().settle(KEYS[2], 'zset')
local leased = redis.call('ZSCORE', KEYS[1], id)
local delayed = redis.call('ZSCORE', KEYS[2], id) and 1 or 0
if not leased and delayed == 0 then return {0, 0} end
for i, kind in pairs({[4] = 'hash', [5] = 'hash', [6] = 'zset', [7] = 'hash', [9] = 'hash',
                      [14] = 'hash'}) do
  guards().settle(KEYS[i], kind)
end
local most = tonumber(ARGV[9])
local over = redis.call('ZCARD', KEYS[6]) - tonumber(ARGV[7]) + 1
local ttl_ms = tonumber(ARGV[8])
if ttl_ms > 0 then
  over = math.max(over, redis.call('ZCOUNT', KEYS[6], '-inf',
                                   '(' .. string.format('%.0f', tonumber(ARGV[2]) - ttl_ms)))
end
if over > 0 and most > 0 then
  local oldest = redis.call('ZRANGE', KEYS[6], 0, math.min(over, most) - 1)
  local gone = #oldest
  for i = 1, #oldest do
    if oldest[i] == id then gone = gone - 1 end
  end
  if gone > 0 then
    guards().settle(KEYS[16], 'string')
    local counted = redis.pcall('INCRBY', KEYS[16], gone)
    -- a count no minitask wrote (text, past 2^63) starts afresh; a refusal is raised
    if type(counted) == 'table' and counted.err then
      if not string.find(tostring(counted.err), 'not an integer', 1, true)
         and not string.find(tostring(counted.err), 'overflow', 1, true) then
        error(counted.err, 0)
      end
      redis.call('SET', KEYS[16], gone)
    end
    for i = 1, #oldest do
      if oldest[i] ~= id then
        redis.call('HDEL', KEYS[7], oldest[i])
        tolerant(0, 'HDEL', KEYS[3], oldest[i])
        redis.call('HDEL', KEYS[14], oldest[i])
        redis.call('ZREM', KEYS[6], oldest[i])
      end
    end
  end
  trimmed = gone
end
if delayed == 1 then redis.call('HDEL', KEYS[9], id) end
-- its slot freed, its spec kept aside (flow_dead) for a requeue_dead (revive.lua)
local spec = tolerant(false, 'HGET', KEYS[10], id)
if spec then redis.call('HSET', KEYS[14], id, spec) end
flow_control().finish(KEYS[10], KEYS[12], KEYS[11], KEYS[13], {id}, true)
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[5], id)
redis.call('HSET', KEYS[7], id, ARGV[3])
redis.call('DEL', KEYS[8])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('RPUSH', KEYS[8], ARGV[3])
  redis.call('PEXPIRE', KEYS[8], ttl)
end
remember(KEYS[15], ARGV[5], ARGV[6])
redis.call('ZADD', KEYS[6], ARGV[2], id)
if delayed == 1 then redis.call('ZREM', KEYS[2], id) end
if leased then redis.call('ZREM', KEYS[1], id) end
return {1, trimmed}
