-- bury: move a task to the dead letters, keeping its message for inspection.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] dead (ZSET)
-- KEYS[7] dead_info (HASH)   KEYS[8] result (LIST)   KEYS[9] order (HASH)
-- KEYS[10] flow (HASH)   KEYS[11] flow_due (ZSET)   KEYS[12] the flow prefix (flow.lua)
-- KEYS[13] wake (LIST)   KEYS[14] flow_dead (HASH)
-- KEYS[15] recent (STREAM): the queue's record of recent outcomes (lib.lua's remember)
-- ARGV[1] id   ARGV[2] now (ms)   ARGV[3] encoded outcome (why it died)
-- ARGV[4] result ttl (ms; 0: keep no result)
-- ARGV[5] the record's length   ARGV[6] the task's entry in it ('': none)
-- Returns: 1 when the task was leased or delayed here and is now dead, 0 when
-- it was not (someone else holds it now and decides its fate).
-- Data minitask did not write (lib.lua): dead holding another type refuses the
-- call (checked first); leases or delayed of another type count as empty. The
-- reason is not kept in a dead_info of another type; deliveries, retrying or
-- order of another type are left as they are; a result key is replaced whole.
local id = ARGV[1]
guards().expect(KEYS[6], 'zset')
local delayed = tolerant(0, 'ZREM', KEYS[2], id)
if tolerant(0, 'ZREM', KEYS[1], id) + delayed == 0 then return 0 end
if delayed == 1 then tolerant(0, 'HDEL', KEYS[9], id) end
-- its slot freed, its spec kept aside (flow_dead) for a requeue_dead (revive.lua)
local spec = tolerant(false, 'HGET', KEYS[10], id)
if spec then tolerant(0, 'HSET', KEYS[14], id, spec) end
flow_control().finish(KEYS[10], KEYS[12], KEYS[11], KEYS[13], {id}, true)
tolerant(0, 'HDEL', KEYS[4], id)
tolerant(0, 'HDEL', KEYS[5], id)
redis.call('ZADD', KEYS[6], ARGV[2], id)
tolerant(0, 'HSET', KEYS[7], id, ARGV[3])
redis.call('DEL', KEYS[8])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('RPUSH', KEYS[8], ARGV[3])
  redis.call('PEXPIRE', KEYS[8], ttl)
end
remember(KEYS[15], ARGV[5], ARGV[6])
return 1
