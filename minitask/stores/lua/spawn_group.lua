-- spawn_group: spawn.lua (or spawn_flow.lua) and group_create.lua in one call, for a
-- workflow whose groups are kept in the queue its steps go to (a chord in one queue):
-- the groups are created after the steps are sent, in the same step (no member can
-- join before), so that a call refused for data minitask did not write (spawn.lua
-- checks before any write) leaves neither the steps nor the groups' state: a group
-- created first waited, until its ttl, for members never sent.
-- stores/scripts.py puts spawn.lua and spawn_flow.lua in front as spawn_base() and
-- spawn_flow_base(); stores/workflow_checks.py makes the call of theirs.
-- KEYS: spawn.lua's or spawn_flow.lua's, then the state (HASH) of each group
-- ARGV: theirs, then group_create.lua's (three per group: size, packed continuation,
--   ttl), then how many groups, then '1' when the steps are spawn_flow.lua's, else '0'
-- Returns: spawn.lua's reply (a count of steps sent, or {it, ids of steps not sent...}).
-- Invariant: spawn.lua's and group_create.lua's (a group that exists, of any type, is
-- left as it is: the step that sends it may run again after a crash).
local flowing = table.remove(ARGV) == '1'
local count = tonumber(table.remove(ARGV))
local groups = {}
for n = count, 1, -1 do
  local ttl, follow, size = table.remove(ARGV), table.remove(ARGV), table.remove(ARGV)
  groups[n] = {table.remove(KEYS), size, follow, ttl}
end
-- which groups exist, read before the steps are sent: after them, the call writes
-- only with HSET and PEXPIRE, which sending a step runs (spawn.lua), so a refusal part
-- way (an ACL changed while a worker runs) never leaves steps sent whose group was
-- never created (a call refused at that EXISTS left them, their body never to run)
local missing = {}
for n, group in ipairs(groups) do missing[n] = redis.call('EXISTS', group[1]) == 0 end
local added
if flowing then added = spawn_flow_base() else added = spawn_base() end
for n, group in ipairs(groups) do
  if missing[n] then
    redis.call('HSET', group[1], 'size', group[2], 'next', group[3])
    redis.call('PEXPIRE', group[1], group[4])
  end
end
return added
