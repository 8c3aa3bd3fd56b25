-- move_aside: KEYS[1], when it holds another type than ARGV[1] (TYPE's name for the
-- kind minitask keeps there), moved aside whole (lib's aside(): to KEYS[1]:foreign, or
-- :foreign2, up to :foreign100), the look and the move in one step: two workers moving
-- the same key at once (a heartbeat's metrics in a process pool's supervisor and its
-- child) never move the key the first one wrote again, nor onto the other's copy.
-- Returns: the name it was moved to, or false (it holds that type, or is missing).
local key, kind = KEYS[1], ARGV[1]
local held = redis.call('TYPE', key)
held = type(held) == 'table' and held.ok or held
if held == 'none' or held == kind then return false end
return guards().aside(key, guards().held_other(kind))
