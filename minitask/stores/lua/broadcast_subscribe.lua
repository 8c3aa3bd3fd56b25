-- broadcast_subscribe: a worker subscribes its name to a queue's broadcasts as it
-- starts: calls sent from now on run on it too. An existing subscription keeps
-- its cursor (a subscriber that was down catches up). It also indexes a batch of
-- cursors an older minitask wrote (broadcast_lib.lua's indexed).
-- KEYS[1..9] as broadcast_lib.lua
-- ARGV[1] subscriber   ARGV[2] now (ms)
-- Returns: 1 when the subscription is new, else 0; a note (text) when refused.
-- Data minitask did not write (lib.lua): cursors of another type makes the call
-- write nothing and return the note broadcast_pull.lua returns for it (the worker
-- logs it once and serves its other queues; its pulls subscribe it once the key is
-- fixed); state's seq missing, no call sequence (1e400, nan, -1, 1.5) or below a
-- cursor or a logged call is read as the highest of them (broadcast_lib.lua's
-- high_water), as a send starts again from it; a cursor that is no call sequence
-- (text, nan, 1.5) is kept, not set to the last call sent: the subscriber's first
-- pull restarts it from the oldest call still logged (broadcast_pull.lua), so the
-- calls it had not pulled still run on it; seen, places, since or alive of another
-- type is left as it is.
-- Refused by Redis part way (an ACL without TIME or a write command it uses): no
-- subscriber is left (no cursor, place or since: join() would wait for it), nothing
-- at all when a new one is refused.
if not guards().fits(KEYS[5], 'hash') then
  return 'key ' .. KEYS[5] .. ' holds another type than the hash minitask keeps there; ' ..
         'this subscriber pulls nothing until it is renamed or deleted'
end
-- Redis keeps the writes made before a refused command (an ACL without one, maybe
-- taken away while workers run): a refused subscribe must leave no subscriber that
-- join() waits for. So the server's clock (TIME) is read before any write, ZADD and
-- HDEL are tried as no-ops (a member XX-incremented by 0; a field just read missing),
-- the first write is an HSET, and since (join()'s who) is written last.
server_ms()
local new = redis.call('HEXISTS', KEYS[5], ARGV[1]) == 0
tolerant(0, 'ZADD', KEYS[8], 'XX', 'INCR', 0, ARGV[1])
if new then redis.call('HDEL', KEYS[5], ARGV[1]) end
local seq
if new then
  local held = guards().whole(state_of('seq'), 0, MAX_SCORE) or 0
  seq = string.format('%.0f', math.max(held, high_water({KEYS[7], KEYS[2], KEYS[8]})))
end
seen_at(ARGV[1], ARGV[2])
age_ahead(KEYS[9])
indexed()
if not new then return 0 end
set_cursor(ARGV[1], seq)
tolerant(0, 'ZADD', KEYS[8], seq, ARGV[1])
return 1
