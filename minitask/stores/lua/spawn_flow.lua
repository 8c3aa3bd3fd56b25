-- spawn_flow: spawn.lua for workflow steps that carry a flow spec: their task's
-- limits (flow.lua) or a group (fair queues, docs/guide/fair-queues.rst).
-- stores/scripts.py puts spawn.lua in front as spawn_base(): this adds to it and
-- copies none of it, and a workflow without such steps never pays for it.
-- KEYS: spawn.lua's (its handle and plan records last, when there are), then flow (HASH),
--   leases (ZSET) and dead (ZSET), read only to check a solo claim (flow.lua's owned()),
--   cancelled (ZSET: a group's token is counted there) and the flow prefix, last.
-- ARGV: spawn.lua's, then one flow spec per step ('' for none), then how many steps.
-- Returns: as spawn.lua (a count of steps sent, or {it, ids of steps not sent...}).
-- A step this call sends gets its spec in the flow hash in the same step. A grouped
-- step due now goes to its group's ready set (flow.lua's flow_fair, as
-- enqueue_group.lua puts a grouped call) and puts its group in the rotation, at most
-- once as spawn.lua sends a step (its marker); every other step is spawn.lua's (a
-- grouped one due later joins its group when a fetch meets it in a ready list).
-- Invariant: spawn.lua's; and a step with a spec is never in Redis without it.
-- A refusal part way (an ACL changed while a worker runs): as spawn.lua, a step's
-- marker says "sent" last, and a call run again sends the step it stopped at.
-- Data minitask did not write (lib.lua): messages of another type, or a
-- marker that is no step marker, refuse the call before any write, and so do
-- spawn.lua's checks (delayed, the ready lists of its steps), made in spawn_base()
-- before its first write (this call writes nothing before it). A grouped step's
-- fair-queue keys (its group's ready set, turn, running set, the groups, cancelled,
-- groups_ready, a ready list its token goes to) are never refused: one of another
-- type is moved aside or left as it is (flow.lua), so no write fails after another.
-- A flow hash of another type holds no spec minitask wrote: it is moved aside
-- (lib.lua's aside(): renamed to flow:foreign, one WARNING in Redis's log) once every
-- check has passed, and the call goes on, as enqueue_flow.lua does.
local prefix = table.remove(KEYS)
local cancelled = table.remove(KEYS)
local dead = table.remove(KEYS)
local leases = table.remove(KEYS)
local flow = table.remove(KEYS)
local count = tonumber(table.remove(ARGV))
local specs = {}
for n = count, 1, -1 do specs[n] = table.remove(ARGV) end
local now = tonumber(ARGV[1])
guards().expect(KEYS[1], 'hash')
-- (one HEXISTS: lib.lua's guards, made only for an error: any but WRONGTYPE raises)
local flow_other = redis.pcall('HEXISTS', flow, '')
flow_other = type(flow_other) == 'table' and guards().foreign(flow_other)
-- the grouped steps due now, taken out of spawn_base()'s KEYS and ARGV (changed in
-- place: it reads them); the others' specs, written for those it sends
local grouped, others, keys, argv = {}, {}, {}, {}
for i = 1, 15 do keys[i] = KEYS[i] end
for i = 1, 7 do argv[i] = ARGV[i] end
for n = 1, count do
  local i = 3 + 5 * n
  local result, marker = KEYS[14 + 2 * n], KEYS[15 + 2 * n]
  local spec = specs[n] ~= '' and flow_control().spec(specs[n])
  if spec and spec.group and tonumber(ARGV[i + 3]) <= now then
    -- checked as spawn.lua checks its own steps', before any write
    local state = step_marker(marker)
    grouped[#grouped + 1] = {state = state, id = ARGV[i], body = ARGV[i + 1],
                             priority = tonumber(ARGV[i + 2]),
                             ttl = ARGV[i + 4], result = result, marker = marker,
                             text = specs[n], spec = spec}
  else
    keys[#keys + 1], keys[#keys + 2] = result, marker
    for j = 0, 4 do argv[#argv + 1] = ARGV[i + j] end
    -- spawn_base() sends it when its marker holds no state (none yet, or only the
    -- reservation of a workflow's explicit id: step_ids.lua) and its message is not
    -- there yet (a marker of another type refuses the call before any write)
    if specs[n] ~= '' and tolerant(0, 'HEXISTS', marker, 'state') == 0
       and redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then
      others[#others + 1] = {ARGV[i], specs[n]}
    end
  end
end
-- the handle record, and the plan record written with it
if tonumber(ARGV[4]) > 0 then
  keys[#keys + 1] = KEYS[16 + 2 * count]
  if ARGV[6] ~= '' then keys[#keys + 1] = KEYS[17 + 2 * count] end
end
for i = #ARGV, 1, -1 do ARGV[i] = argv[i] end
for i = #KEYS, 1, -1 do KEYS[i] = keys[i] end

local added = spawn_base()
-- (spawn_base() and the steps' markers have made their checks: a refused call changed nothing)
if flow_other then guards().aside(flow, guards().held_other('hash')) end
local skipped  -- spawn.lua's reply: a count, or {count, ids of steps not sent...}
if type(added) == 'table' then skipped, added = added, added[1] end

for _, step in ipairs(others) do redis.call('HSET', flow, step[1], step[2]) end
local fair, wake = nil, false
for _, step in ipairs(grouped) do
  if step.state then
    skipped = skipped or {0}
    skipped[#skipped + 1] = step.id
  elseif redis.call('HEXISTS', KEYS[1], step.id) == 1 then
    -- its id holds a task already: marked sent, nothing sent (as spawn.lua)
    if ARGV[7] ~= '' then
      redis.call('HSET', step.marker, 'state', 'sent', 'w', ARGV[7])
    else
      redis.call('HSET', step.marker, 'state', 'sent')
    end
    redis.call('PEXPIRE', step.marker, step.ttl)
  else
    -- as spawn.lua sends a step: the marker's commands first (no state), its message
    -- after it joined its group, "sent" last; a call refused in the join (an ACL
    -- changed while a worker runs) leaves the step unsent, and joins it again when
    -- run again (its group's ready set is a set: one entry)
    redis.call('HSET', step.marker, 'w', ARGV[7])
    redis.call('PEXPIRE', step.marker, step.ttl)
    redis.call('DEL', step.result)
    redis.call('HSET', flow, step.id, step.text)
    fair = fair or flow_control().fair({prefix = prefix, first_ready = 4, now = ARGV[1],
                                        cancelled = cancelled, messages = KEYS[1],
                                        flow = flow, leases = leases, dead = dead,
                                        delayed = KEYS[2]})
    if fair.join(step.id, step.spec, step.priority) then wake = true end
    redis.call('HSET', KEYS[1], step.id, step.body)
    redis.call('HSET', step.marker, 'state', 'sent')
    if ARGV[7] == '' then redis.call('HDEL', step.marker, 'w') end  -- (as spawn.lua)
    added = added + 1
  end
end
if wake then tolerant(0, 'RPUSH', KEYS[3], '1') end
if skipped then
  skipped[1] = added
  return skipped
end
return added
