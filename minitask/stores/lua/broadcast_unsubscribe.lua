-- broadcast_unsubscribe: remove a subscriber of a queue's broadcasts; the calls
-- only it still had to pull are deleted (a batch per call; sends drop the rest).
-- KEYS[1..9] as broadcast_lib.lua
-- ARGV[1] subscriber   ARGV[2] batch limit
-- Returns: 1 when it was subscribed, else 0.
-- Data minitask did not write (lib.lua): cursors, seen or the indexes of another
-- type count as empty.
local removed = forget_subscriber(ARGV[1])
drop_pulled(tonumber(ARGV[2]))
return removed
