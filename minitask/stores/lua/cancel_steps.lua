-- cancel_steps: workflow steps that must never run, because a step before them
-- ended dead: each gets its marker (so that no later spawn sends it) and a
-- cancelled outcome naming the failed step. A step whose marker exists was sent
-- already, or cancelled already: it is left as it is (its first fate counts).
-- A marker minitask did not write (another type, or a state that is neither sent
-- nor cancelled) is left as it is too, and spawn refuses to send its step: that
-- step still gets the cancelled outcome, unless it has an outcome already, so that
-- what waits for it ends instead of waiting for ever.
-- KEYS[2i - 1] marker (HASH: state) and KEYS[2i] result (LIST) of the i-th step
-- ARGV[1] encoded outcome (cancelled, naming the step that ended dead)
-- ARGV[2] the id of the steps' workflow ('': none), kept in each new marker's field w
-- ARGV[2 + i] ttl of the i-th step's marker and outcome (ms)
-- Returns: how many steps were cancelled by this call.
local cancelled = 0
local workflow = ARGV[2]
for i = 3, #ARGV do
  local marker, result = KEYS[2 * i - 5], KEYS[2 * i - 4]
  local ours = guards().fits(marker, 'hash')
  if ours then
    local state = redis.call('HGET', marker, 'state')
    ours = not state or state == 'sent' or state == 'cancelled'
  end
  local write
  if ours then
    write = redis.call('HSETNX', marker, 'state', 'cancelled') == 1
    if write then
      if workflow ~= '' then redis.call('HSET', marker, 'w', workflow) end
      redis.call('PEXPIRE', marker, ARGV[i])
    end
  else
    write = redis.call('EXISTS', result) == 0
  end
  if write then
    redis.call('DEL', result)
    redis.call('RPUSH', result, ARGV[1])
    redis.call('PEXPIRE', result, ARGV[i])
    cancelled = cancelled + 1
  end
end
return cancelled
