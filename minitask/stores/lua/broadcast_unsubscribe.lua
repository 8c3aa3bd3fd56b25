-- broadcast_unsubscribe: remove a subscriber of a queue's broadcasts; the calls
-- only it still had to pull are deleted (a batch per call; sends drop the rest).
-- KEYS[1..5] as broadcast_lib.lua   KEYS[6] bcast:seen (HASH)
-- ARGV[1] subscriber   ARGV[2] batch limit
-- Returns: 1 when it was subscribed, else 0.
-- Data minitask did not write (lib.lua): cursors or seen of another type count
-- as empty.
local removed = tolerant(0, 'HDEL', KEYS[5], ARGV[1])
tolerant(0, 'HDEL', KEYS[6], ARGV[1])
drop_pulled(tonumber(ARGV[2]))
return removed
