-- revive: put a dead task back at the tail of its queue for a fresh start, behind
-- the delayed tasks already due (promote.lua, prepended by stores/scripts.py, moves them).
-- KEYS[1] dead (ZSET)   KEYS[2] dead_info (HASH)   KEYS[3] messages (HASH)
-- KEYS[4] wake (LIST)   KEYS[5] result (LIST)
-- KEYS[6..15] ready lists, priority 9 first (KEYS[15 - p] holds priority p)
-- KEYS[16] delayed (ZSET)   KEYS[17] order (HASH)
-- KEYS[18] flow (HASH)   KEYS[19] flow_dead (HASH)
-- ARGV[1] id   ARGV[2] encoded message for the new first attempt   ARGV[3] priority
-- ARGV[4] now (ms)   ARGV[5] promotion limit
-- Returns: 1 when revived, 0 when the id is not among the dead letters, -1 when
-- its message is gone (a dead set member no minitask wrote, or one whose message
-- was deleted): nothing is written then, as a ready id with no message would run
-- nothing (the fetch drops it, as a cancelled one).
-- Flow control (flow.lua): the limits the task had when it died (its spec, kept in
-- flow_dead by bury.lua) hold again, rate, max_running and limit key, and its group
-- (fair queues); its expiry and debounce do not (a fresh first attempt an operator
-- asked for).
-- Data minitask did not write (lib.lua): messages or the ready list holding
-- another type refuses the call (checked first); dead of another type holds no
-- dead letter; dead_info or wake of another type are left as they are; a result
-- key is replaced whole; flow keys of another type count as empty (no limits).
-- The task leaves dead (and its reason, its spec kept aside) only after it is queued:
-- Redis keeps the writes a script made before a refusal (an ACL changed since:
-- NOPERM), and a task taken out of dead first was lost by a refused RPUSH; now what
-- is left keeps it dead (a ready entry of a dead id is dropped by a fetch, fetch.lua).
local id = ARGV[1]
if not tolerant(false, 'ZSCORE', KEYS[1], id) then return 0 end
guards().expect(KEYS[3], 'hash')
if redis.call('HEXISTS', KEYS[3], id) == 0 then return -1 end
local batch = due_batch(KEYS[16], KEYS[17], 6, tonumber(ARGV[4]), tonumber(ARGV[5]))
local ready = KEYS[15 - tonumber(ARGV[3])]
guards().expect(ready, 'list')
promote(KEYS[16], KEYS[17], batch)
redis.call('HSET', KEYS[3], id, ARGV[2])
redis.call('DEL', KEYS[5])
local spec = tolerant(false, 'HGET', KEYS[19], id)
local limits = type(spec) == 'string' and string.match(spec, '^([^\n]*\n%d+\n%d+\n%d+)\n')
-- a grouped task's group and its limits (flow.lua's fair queues): it joins its group
-- again when a fetch meets it
local group = limits and string.match(spec, '^[^\n]*\n%d+\n%d+\n%d+\n%d+\n%d(\n%d+\n%d+\n%d+\n.+)$')
if limits and (group or string.find(limits, '^[^\n]')) then
  tolerant(0, 'HSET', KEYS[18], id, limits .. '\n0\n0' .. (group or ''))
else
  tolerant(0, 'HDEL', KEYS[18], id)
end
redis.call('RPUSH', ready, id)
redis.call('ZREM', KEYS[1], id)
tolerant(0, 'HDEL', KEYS[2], id)
tolerant(0, 'HDEL', KEYS[19], id)
tolerant(0, 'RPUSH', KEYS[4], '1')
return 1
