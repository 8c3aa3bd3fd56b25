-- broadcast_wake: wake the lanes a send or a pull was to wake but could not, their
-- wake lists not declared to it (the wake tree changed since the caller's last
-- call: broadcast_lib.lua's wake_from).
-- KEYS[i] the wake list of a subscriber's lane, under the queue's tag
-- ARGV[1] tokens to push on each   ARGV[2] wake cap
-- Returns: the number of lists woken.
-- Data minitask did not write (lib.lua): a wake list of another type gets no token.
local tokens, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 1, #KEYS do push_wake(KEYS[i], tokens, cap) end
return #KEYS
