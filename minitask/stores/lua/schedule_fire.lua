-- schedule_fire: fire one armed tick of a schedule, in one step any number of
-- workers may race: the first arms the next tick and enqueues the run (or skips
-- it); every other finds the tick moved on and does nothing.
-- Runs after promote.lua (prepended by stores/schedules.py): due delayed tasks
-- are queued first, so the run joins its ready list in due order.
-- KEYS[1] schedules (HASH)   KEYS[2] ticks (ZSET)   KEYS[3] fired (HASH)
-- KEYS[4] messages (HASH)    KEYS[5] dead (ZSET)    KEYS[6] delayed (ZSET)
-- KEYS[7] order (HASH)       KEYS[8] wake (LIST)
-- KEYS[9..18] ready lists, priority 9 first (KEYS[18 - p] holds priority p)
-- KEYS[19] result (LIST) of the run's id
-- ARGV[1] schedule name   ARGV[2] the record the worker computed from
-- ARGV[3] the armed tick being fired (ms)   ARGV[4] the tick to arm next (ms, -1: none)
-- ARGV[5] the tick to run (ms), or -1: run none (catch_up='skip' after downtime)
-- ARGV[6] the run's task id   ARGV[7] its encoded message   ARGV[8] its priority
-- ARGV[9] now (ms)   ARGV[10] 1: runs may overlap, 0: skip while the last one is pending
-- ARGV[11] wake cap (tokens kept at most)   ARGV[12] promotion limit
-- ARGV[13] 1: push a wake token for the run; 0: the caller fetches from this
--   queue right behind this call (in the same write), so no idle worker is woken
-- ARGV[3] may be a score that is no tick (inf, 1e300, 1.5: not minitask's): the
--   worker re-arms it, with ARGV[5] -1 (no run)
-- Returns: {status, armed tick (ms) or -1}; status is
--   'foreign': a key holds another type (the third element says so, the fourth
--             is the key); nothing was changed
--   (any other status: a fifth element, when not '', names the key a fired hash of
--   another type was moved aside to, below)
--   'changed': the record differs or is gone, or the tick is gone: the worker must
--             read it again
--   'moved':   another worker fired this tick; armed is the schedule's next tick
--   'fired', 'skipped' (catch-up), 'overlap' (the last run is still queued or
--   running): this call advanced the schedule; armed is the tick it armed.
-- Invariant: a tick is fired once: the armed tick only moves forward, here, and
-- only from the value the caller read; a run's id is derived from its tick. The
-- tick moves on last, after its run is queued and recorded in fired (below).
local name = ARGV[1]
-- every key this call may write to is checked first: a key of another type
-- makes it change nothing and say which ('foreign'), so the worker fires the
-- schedules of its other queues, and serves them, all the same. The fired hash is
-- the exception: it only says what the queue's schedules last ran, so one of
-- another type (which holds none of that) is moved aside whole before the run is
-- written (lib.lua's aside(): to fired:foreign, kept for its owner), and every
-- schedule of the queue fires on; it held back every one of them until someone
-- renamed it by hand
local kinds = {'hash', 'zset', false, 'hash', 'zset', 'zset', 'hash'}
for i = 1, 18 do
  local kind = kinds[i]
  if kind == nil then kind = i > 8 and 'list' end
  if kind and not guards().fits(KEYS[i], kind) then
    return {'foreign', -1, 'it holds another type than the ' .. kind .. ' minitask keeps ' ..
            'there; the schedule ' .. name .. ' is not fired until it is renamed or deleted',
            KEYS[i]}
  end
end
-- (measured first: a record of another length is not copied to be compared)
if redis.call('HSTRLEN', KEYS[1], name) ~= #ARGV[2]
    or redis.call('HGET', KEYS[1], name) ~= ARGV[2] then
  return {'changed', -1}
end
local armed = redis.call('ZSCORE', KEYS[2], name)
if not armed then
  -- no tick at all: its ticks key deleted or evicted (or another worker fired the
  -- schedule's last tick): the worker reads again at once, and that read writes a
  -- decorated schedule's tick back (worker/lost_schedules.py), armed at its next
  -- tick; 'moved' left it unarmed in the worker's copy until its next read (5 s)
  return {'changed', -1}
end
if tonumber(armed) ~= tonumber(ARGV[3]) then
  -- (a tick that is no whole number of ms, such as inf, is none to report)
  return {'moved', guards().whole(armed, 0, MAX_SCORE) or -1}
end
local following = tonumber(ARGV[4])
-- the tick moves on (ZADD, or ZREM for a schedule with no next tick)
local function advance()
  if following >= 0 then
    redis.call('ZADD', KEYS[2], ARGV[4], name)
  else
    redis.call('ZREM', KEYS[2], name)
  end
end
if tonumber(ARGV[5]) < 0 then
  advance()
  return {'skipped', following}
end
local id = ARGV[6]
local moved = ''
if not guards().fits(KEYS[3], 'hash') then
  moved = guards().aside(KEYS[3], guards().held_other('hash'))
end
-- fired names the run of the tick being fired when a call fired it and was refused
-- before the tick moved on: it is not written again (it may have run since)
local previous = redis.call('HGET', KEYS[3], 'id:' .. name)
if previous ~= id then
  if ARGV[10] == '0' and previous and redis.call('HEXISTS', KEYS[4], previous) == 1
      and not redis.call('ZSCORE', KEYS[5], previous) then
    advance()
    return {'overlap', following, '', '', moved}
  end
  local now = tonumber(ARGV[9])
  promote_due(KEYS[6], KEYS[7], 9, now, tonumber(ARGV[12]))
  -- A refusal part way (an ACL changed while a worker runs: Redis refuses a command
  -- as the script comes to it and keeps the writes before) must neither lose this
  -- tick's run nor write it twice. So the run's message, and a ZADD (or ZREM) that
  -- changes nothing, come before its push, which is followed only by commands run
  -- already (HSET, then ZADD or ZREM): a call refused before the push leaves the tick
  -- armed and the run unqueued (its message, rewritten by the next call), and one
  -- that pushed records it in fired and moves the tick on. (The tick moved on first:
  -- a refused push lost the tick's run.)
  redis.call('HSET', KEYS[4], id, ARGV[7])
  redis.call('DEL', KEYS[19])
  if following >= 0 then
    redis.call('ZADD', KEYS[2], 'XX', ARGV[3], name)  -- (the armed tick as it is)
  else
    redis.call('ZREM', KEYS[2], '')  -- (no schedule is named '')
  end
  redis.call('RPUSH', KEYS[18 - tonumber(ARGV[8])], id)
  redis.call('HSET', KEYS[3], 'at:' .. name, ARGV[5], 'id:' .. name, id)
  if ARGV[13] == '1' then
    -- a wake token is a hint (workers poll too): one refused is left out
    local cap = tonumber(ARGV[11])
    local held = redis.pcall('RPUSH', KEYS[8], '1')
    if type(held) == 'number' and held > cap then redis.pcall('LTRIM', KEYS[8], 0, cap - 1) end
  end
end
advance()
return {'fired', following, '', '', moved}
