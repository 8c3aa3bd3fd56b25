-- retry: end a failed attempt and schedule the next one.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] wake (LIST)
-- KEYS[7] order (HASH)   KEYS[8] sequence (STRING)
-- KEYS[9] flow (HASH)   KEYS[10] flow_due (ZSET)   KEYS[11] the flow prefix (flow.lua)
-- KEYS[12] recent (STREAM): the queue's record of recent outcomes (lib.lua's remember)
-- ARGV[1] id   ARGV[2] encoded message for the next attempt
-- ARGV[3] due (ms)   ARGV[4] priority   ARGV[5] encoded outcome of the failed attempt
-- ARGV[6] the record's length   ARGV[7] the attempt's entry in it ('': none)
-- Returns: 1, or 0 when the caller had lost the lease (nothing is changed then:
-- whoever holds the task now decides its fate).
-- Data minitask did not write (lib.lua): every key the call writes (leases, delayed,
-- messages, deliveries, retrying, wake, order, sequence, recent, the flow keys) that
-- holds another type is moved aside to `key`:foreign first (lib.lua's aside()), so the
-- retry is always scheduled: leases of another type count as empty then (the lease as
-- lost). A sequence that is no number starts afresh.
-- The lease is removed last, after every other write: Redis keeps the writes a
-- script made before a refusal (an ACL changed while the worker runs: NOPERM), and a
-- lease left makes the task come back when it expires (at least once); removed
-- first, a refusal after it lost the task.
local id = ARGV[1]
guards().settle(KEYS[1], 'zset')
if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
for i, kind in pairs({[2] = 'zset', [3] = 'hash', [4] = 'hash', [5] = 'hash', [6] = 'list',
                      [7] = 'hash', [8] = 'string'}) do
  guards().settle(KEYS[i], kind)
end
-- its slot freed; the spec stays
flow_control().finish(KEYS[9], KEYS[11], KEYS[10], KEYS[6], {id}, false)
redis.call('HSET', KEYS[3], id, ARGV[2])
redis.call('HDEL', KEYS[4], id)
redis.call('HSET', KEYS[5], id, ARGV[5])
local score = string.format('%.0f', tonumber(ARGV[3]) * 10 + 9 - tonumber(ARGV[4]))
redis.call('ZADD', KEYS[2], score, id)
redis.call('HSET', KEYS[7], id, guards().bump(KEYS[8]))
if redis.call('ZRANGE', KEYS[2], 0, 0)[1] == id then
  redis.call('RPUSH', KEYS[6], '1')
end
remember(KEYS[12], ARGV[6], ARGV[7])
redis.call('ZREM', KEYS[1], id)
return 1
