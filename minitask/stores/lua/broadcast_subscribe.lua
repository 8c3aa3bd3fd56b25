-- broadcast_subscribe: a worker subscribes its name to a queue's broadcasts as it
-- starts: calls sent from now on run on it too. An existing subscription keeps
-- its cursor (a subscriber that was down catches up). It also indexes a batch of
-- cursors an older minitask wrote (broadcast_lib.lua's indexed).
-- KEYS[1..9] as broadcast_lib.lua
-- ARGV[1] subscriber   ARGV[2] now (ms)
-- Returns: 1 when the subscription is new, else 0.
-- Data minitask did not write (lib.lua): cursors of another type refuses the
-- call; a cursor that is no call sequence (text, nan, 1.5) is kept, not set to
-- the last call sent: the subscriber's first pull restarts it from the oldest call
-- still logged (broadcast_pull.lua), so the calls it had not pulled still run on
-- it; seen, places, since or alive of another type is left as it is.
guards().expect(KEYS[5], 'hash')
local seq = string.format('%.0f', tonumber(tolerant(false, 'HGET', KEYS[1], 'seq')) or 0)
local new = 0
if not redis.call('HGET', KEYS[5], ARGV[1]) then
  set_cursor(ARGV[1], seq)
  tolerant(0, 'ZADD', KEYS[8], seq, ARGV[1])
  new = 1
end
seen_at(ARGV[1], ARGV[2])
indexed()
return new
