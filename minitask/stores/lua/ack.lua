-- ack: record the final outcome of one or more tasks of a queue and remove
-- every trace of them from the queue.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] order (HASH)
-- KEYS[7] flow (HASH)   KEYS[8] flow_due (ZSET)   KEYS[9] the flow prefix (flow.lua)
-- KEYS[10] wake (LIST)
-- KEYS[10 + i] result (LIST) of the i-th task
-- ARGV: per task three: id, encoded outcome, result ttl (ms; 0: keep no result)
-- Returns: per task, 1 when the caller still held the lease, 0 when it had lost
-- it (the task was re-delivered meanwhile; the outcome is recorded all the
-- same, and a ready-list entry left behind is skipped by fetch, its message
-- being gone).
-- Invariant: a message leaves Redis in the same step that records its outcome.
-- Data minitask did not write (lib.lua): an ack never fails on it. A key of
-- another type among the first six counts as empty (its leases as lost); a
-- result key is replaced whole. On this hot path, redis.pcall and lib.lua's
-- foreign() only for an error.
local held, ids = {}, {}
for i = 1, #ARGV, 3 do
  local id, result = ARGV[i], KEYS[10 + (i + 2) / 3]
  ids[#ids + 1] = id
  local removed = redis.pcall('ZREM', KEYS[1], id)
  if type(removed) == 'table' then foreign(removed) removed = 0 end
  held[#held + 1] = removed
  redis.call('DEL', result)
  local ttl = tonumber(ARGV[i + 2])
  if ttl > 0 then
    redis.call('RPUSH', result, ARGV[i + 1])
    redis.call('PEXPIRE', result, ttl)
  end
end
-- one call per key for the whole batch (batches are capped at MAX_PREFETCH ids)
local removed = redis.pcall('ZREM', KEYS[2], unpack(ids))
if type(removed) == 'table' then foreign(removed) removed = 0 end
if removed > 0 then
  tolerant(0, 'HDEL', KEYS[6], unpack(ids))  -- delayed ids keep their sequence in order
end
for key = 3, 5 do
  removed = redis.pcall('HDEL', KEYS[key], unpack(ids))
  if type(removed) == 'table' then foreign(removed) end
end
-- flow control: max_running slots freed, specs dropped (one HLEN without any)
flow_end(KEYS[7], KEYS[9], KEYS[8], KEYS[10], ids, true)
return held
