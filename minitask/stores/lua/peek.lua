-- peek: the first tasks of a queue's leases (running) or delayed set (scheduled),
-- in score order, with their messages and delivery counts, read in one step: one
-- round trip per queue, whatever the number of tasks (minitask inspect).
-- KEYS[1] leases or delayed (ZSET)   KEYS[2] messages (HASH)   KEYS[3] deliveries (HASH)
-- ARGV[1] how many tasks, at most (1 to 1000: HMGET takes them as arguments)
-- Returns: {how many the set holds, its first ids and scores (ZRANGE WITHSCORES),
--   their messages, their delivery counts} (a missing one is nil)
-- Invariant: reads only.
-- Data minitask did not write (lib.lua): a key of another type is read as empty.
local total = tolerant(0, 'ZCARD', KEYS[1])
local listed = tolerant({}, 'ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
if #listed == 0 then return {total, {}, {}, {}} end
local ids = {}
for i = 1, #listed, 2 do ids[#ids + 1] = listed[i] end
return {total, listed, tolerant({}, 'HMGET', KEYS[2], unpack(ids)),
        tolerant({}, 'HMGET', KEYS[3], unpack(ids))}
