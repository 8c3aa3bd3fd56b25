-- cancel: withdraw a task that has not started; it will never run.
-- KEYS[1] delayed (ZSET)   KEYS[2] leases (ZSET)   KEYS[3] dead (ZSET)
-- KEYS[4] messages (HASH)  KEYS[5] retrying (HASH)   KEYS[6] result (LIST)
-- KEYS[7] deliveries (HASH)   KEYS[8] order (HASH)   KEYS[9] cancelled (ZSET)
-- KEYS[10] flow (HASH): the task's flow spec, if any, goes with it
-- KEYS[11] the flow prefix   KEYS[12] flow_due (ZSET)   KEYS[13] wake (LIST): a
--   retried task of a fair queue holds its group_max_running slot while scheduled;
--   cancelled, it frees it (flow.lua's finish), and its group is tried again
-- KEYS[14] recent (STREAM): the queue's record of recent outcomes (lib.lua's remember)
-- ARGV[1] id   ARGV[2] encoded outcome (cancelled)   ARGV[3] result ttl (ms)
-- ARGV[4] the task's priority (read from its message by the caller)
-- ARGV[5] the record's length   ARGV[6] the task's entry in it ('': none)
-- Returns: 1 when cancelled, 0 when the task is running, finished, dead or unknown.
-- A cancelled ready task keeps its ready-list entry; without its message,
-- fetch drops it. That keeps cancel O(1) however long the queue; the id waits in
-- cancelled, at its priority, until then, so that counts can leave it out.
-- Data minitask did not write (lib.lua): a cancel never fails on it. A key of
-- another type counts as empty (cancelled of another type: the id is not left
-- out of the counts); a result key is replaced whole.
local id = ARGV[1]
local scheduled = tolerant(0, 'ZREM', KEYS[1], id) == 1
if scheduled then
  tolerant(0, 'HDEL', KEYS[8], id)
else
  if tolerant(false, 'ZSCORE', KEYS[2], id) or tolerant(false, 'ZSCORE', KEYS[3], id) then
    return 0
  end
  if tolerant(0, 'HEXISTS', KEYS[4], id) == 0 then return 0 end
  tolerant(0, 'ZADD', KEYS[9], ARGV[4], id)
end
tolerant(0, 'HDEL', KEYS[4], id)
tolerant(0, 'HDEL', KEYS[5], id)
tolerant(0, 'HDEL', KEYS[7], id)
if scheduled then
  flow_control().finish(KEYS[10], KEYS[11], KEYS[12], KEYS[13], {id}, true)
else
  tolerant(0, 'HDEL', KEYS[10], id)
end
redis.call('DEL', KEYS[6])
redis.call('RPUSH', KEYS[6], ARGV[2])
redis.call('PEXPIRE', KEYS[6], tonumber(ARGV[3]))
remember(KEYS[14], ARGV[5], ARGV[6])
return 1
