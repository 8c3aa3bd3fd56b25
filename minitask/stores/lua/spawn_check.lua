-- spawn_check: refuse, before a workflow spanning several script calls (queues, or
-- SPAWN_CHUNK steps) writes anything, what its spawn calls in one queue would refuse
-- (data minitask did not write), naming the key and its type; writes nothing
-- (stores/workflow_checks.py).
-- KEYS[1] messages (HASH)   KEYS[2] delayed (ZSET)   KEYS[3] wake (LIST)
-- KEYS[4..13] ready lists, priority 9 first (KEYS[13 - p] holds priority p)
-- KEYS[14] flow (HASH)   KEYS[15..] the step markers (HASH, keys.py: once:<id>)
-- ARGV[1] '1': a step is due later (delayed is added to)
-- ARGV[2] '1': a step has a flow spec (flow is added to)
-- ARGV[3..] the priorities of the steps due now (their ready lists are added to)
-- Returns: 0. The checks are those spawn.lua and spawn_flow.lua refuse a call for.
local function refuse(key, why)
  error('WRONGTYPE minitask key ' .. key .. ' ' .. why .. ' (data minitask did not ' ..
        'write): nothing of the workflow was sent', 0)
end
local function expect(key, kind)
  local held = redis.call('TYPE', key)['ok']
  if held ~= 'none' and held ~= kind then
    refuse(key, 'holds a ' .. held .. ', not the ' .. kind .. ' minitask keeps there')
  end
end
for n = 15, #KEYS do
  expect(KEYS[n], 'hash')
  local state = redis.call('HGET', KEYS[n], 'state')
  if state and state ~= 'sent' and state ~= 'cancelled' then
    refuse(KEYS[n], 'holds no step marker minitask wrote (its state is neither sent ' ..
                    'nor cancelled)')
  end
end
expect(KEYS[1], 'hash')
expect(KEYS[3], 'list')
if ARGV[1] == '1' then expect(KEYS[2], 'zset') end
if ARGV[2] == '1' then expect(KEYS[14], 'hash') end
for i = 3, #ARGV do expect(KEYS[13 - tonumber(ARGV[i])], 'list') end
return 0
