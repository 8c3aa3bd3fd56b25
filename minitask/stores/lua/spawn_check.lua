-- spawn_check: refuse, before a workflow spanning several script calls (queues, or
-- SPAWN_CHUNK steps) writes anything, what its spawn calls in one queue would refuse
-- (data minitask did not write), naming the key and its type; writes nothing
-- (stores/workflow_checks.py). Each spawn call makes the same checks before its own
-- writes: this one is for the calls together (not atomic across queues).
-- KEYS[1] messages (HASH)   KEYS[2] delayed (ZSET)   KEYS[3] wake (LIST: left as it is
--   when of another type, so not checked)
-- KEYS[4..13] ready lists, priority 9 first (KEYS[13 - p] holds priority p)
-- KEYS[14..] the step markers (HASH, keys.py: once:<id>)
-- ARGV[1] '1': a step is due later (delayed is added to)
-- ARGV[2..] the priorities of the steps due now (their ready lists are added to)
-- Returns: 0. The checks are those spawn.lua and spawn_flow.lua refuse a call for
-- (lib.lua's step_marker and guards().expect, each naming the key and its type). A
-- flow hash of another type is not one: spawn_flow.lua moves it aside and goes on.
for n = 14, #KEYS do step_marker(KEYS[n]) end
local expect = guards().expect
expect(KEYS[1], 'hash')
if ARGV[1] == '1' then expect(KEYS[2], 'zset') end
for i = 2, #ARGV do expect(KEYS[13 - tonumber(ARGV[i])], 'list') end
return 0
