-- end_cancelled: record that a running attempt was stopped on request, if the
-- caller's attempt still holds the task: it ends cancelled, never retried.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] order (HASH)
-- KEYS[7] result (LIST)
-- KEYS[8] flow (HASH)   KEYS[9] flow_due (ZSET)   KEYS[10] the flow prefix (flow.lua)
-- KEYS[11] wake (LIST)
-- KEYS[12] recent (STREAM): the queue's record of recent outcomes (lib.lua's remember)
-- ARGV[1] id   ARGV[2] encoded outcome (cancelled)   ARGV[3] result ttl (ms)
-- ARGV[4] the record's length   ARGV[5] the task's entry in it ('': none)
-- Returns: 1 when recorded, 0 when the lease was gone: the attempt's own outcome
-- (it finished just before it was stopped) is recorded already and stays.
-- Invariant: as ack.lua, the message leaves Redis in the step that records it;
-- its max_running slot is freed and its flow spec dropped in the same step (a
-- slot kept would hold the limiter's parked tasks until another call came).
-- Data minitask did not write (lib.lua): every key the call writes (leases, delayed,
-- messages, deliveries, retrying, order, recent, the flow keys) that holds another
-- type is moved aside to `key`:foreign first (lib.lua's aside()), so the cancellation
-- is always recorded: leases of another type count as empty then (the lease as
-- lost). A result key is replaced whole.
-- The lease is removed last, after every other write (as ack.lua): a refusal part way
-- (an ACL changed while the worker runs: NOPERM) leaves it, and the task comes back
-- when it expires, never lost.
local id = ARGV[1]
guards().settle(KEYS[1], 'zset')
if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
for i, kind in pairs({[2] = 'zset', [3] = 'hash', [4] = 'hash', [5] = 'hash', [6] = 'hash'}) do
  guards().settle(KEYS[i], kind)
end
redis.call('DEL', KEYS[7])
redis.call('RPUSH', KEYS[7], ARGV[2])
redis.call('PEXPIRE', KEYS[7], tonumber(ARGV[3]))
remember(KEYS[12], ARGV[4], ARGV[5])
flow_control().finish(KEYS[8], KEYS[10], KEYS[9], KEYS[11], {id}, true)
if redis.call('ZREM', KEYS[2], id) > 0 then redis.call('HDEL', KEYS[6], id) end
redis.call('HDEL', KEYS[5], id)
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[3], id)
redis.call('ZREM', KEYS[1], id)
return 1
