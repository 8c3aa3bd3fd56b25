-- enqueue_group: enqueue_flow.lua for sends that hold grouped calls (fair queues,
-- docs/guide/fair-queues.rst). stores/scripts.py puts enqueue.lua and enqueue_flow.lua
-- in front as enqueue_base() and enqueue_flow_base(): this adds to them and copies
-- neither, and a send without a group never pays for it.
-- KEYS: enqueue_flow.lua's (enqueue.lua's, then flow), then cancelled (ZSET: a token
--   is counted there while in a ready list), then the flow prefix last.
-- ARGV: enqueue_flow.lua's.
-- Returns: enqueue_flow.lua's count, plus the grouped messages added.
-- A grouped message due now (its spec names a group: flow.lua's flow_fair) goes to
-- its group's ready set, not to a ready list, with its spec, and puts its group in
-- the rotation; one due later is scheduled as any other (enqueue_flow.lua) and joins
-- its group when a fetch meets it in a ready list. An id already pending is left as
-- it is.
-- Invariant: enqueue_flow.lua's, and a grouped ready message is in its group's ready
-- set, never in a ready list, from the step that adds it.
-- Data minitask did not write (lib.lua): messages or flow of another type refuse the
-- call, before any write, and so does, for a grouped message due now, its group's
-- ready set or turn, or the ready list of its priority (its group's token goes
-- there), naming the task and its group: written past, the task would never run.
local prefix = table.remove(KEYS)
local cancelled = table.remove(KEYS)
local count = tonumber(ARGV[#ARGV])
local first_spec = #ARGV - count - 1  -- ARGV[first_spec + n] is the n-th message's spec
local now = tonumber(ARGV[1])
local grouped, argv, specs, keys = {}, {ARGV[1], ARGV[2], ARGV[3]}, {}, {}
for i = 1, 15 do keys[i] = KEYS[i] end
local flow_key = KEYS[#KEYS]
for n = 1, count do
  local i = 4 * n
  local spec = ARGV[first_spec + n]
  -- a grouped spec goes on past its sixth line (flow.lua)
  if string.find(spec, '^[^\n]*\n%d+\n%d+\n%d+\n%d+\n%d\n') and tonumber(ARGV[i + 3]) <= now then
    grouped[#grouped + 1] = {ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), spec, KEYS[15 + n]}
  else
    for j = 0, 3 do argv[#argv + 1] = ARGV[i + j] end
    keys[#keys + 1] = KEYS[15 + n]
    specs[#specs + 1] = spec
  end
end
guards().expect(KEYS[1], 'hash')
guards().expect(flow_key, 'hash')
-- the keys a grouped message is written to, checked before any write: its group's
-- ready set and turn, and the ready list its group's token goes to (one check a key
-- a call); one of another type refuses the call naming the task, the key and its group
-- (a redis.pcall each, lib.lua's guards only for an error: most calls meet none)
-- Returns whether the key was empty (false when checked already this call).
local checked, reads = {}, {zset = 'ZCARD', hash = 'HLEN', list = 'LLEN'}
local function writable(key, kind, entry, group)
  if checked[key] then return false end
  local reply = redis.pcall(reads[kind], key)
  if type(reply) == 'table' and reply.err and guards().foreign(reply) then
    error('WRONGTYPE minitask key ' .. key .. ' holds another type than the ' .. kind
          .. ' minitask keeps there, so task ' .. entry[1] .. ' of group ' .. group
          .. ' could never run; nothing was changed', 0)
  end
  checked[key] = true
  return reply == 0
end
for _, entry in ipairs(grouped) do
  local spec = flow_control().spec(entry[4])
  entry[6] = spec
  if spec and spec.group then
    local base = prefix .. 'g:' .. spec.group
    -- a group with neither (its first task this call): joined without reading them
    local no_ready = writable(base .. ':ready', 'zset', entry, spec.group)
    entry[7] = writable(base .. ':turn', 'hash', entry, spec.group) and no_ready
    writable(KEYS[13 - entry[3]], 'list', entry, spec.group)
  end
end
-- what enqueue_flow_base() reads: the other messages, their specs and count, flow last
-- (KEYS and ARGV are changed in place: the functions read them)
for _, spec in ipairs(specs) do argv[#argv + 1] = spec end
argv[#argv + 1] = #specs
keys[#keys + 1] = flow_key
for i = #ARGV, 1, -1 do ARGV[i] = argv[i] end
for i = #KEYS, 1, -1 do KEYS[i] = keys[i] end

local added = enqueue_flow_base()

local fair = flow_control().fair({prefix = prefix, first_ready = 4, now = ARGV[1],
                                  cancelled = cancelled})
local wake = false
for _, entry in ipairs(grouped) do
  if redis.call('HSETNX', KEYS[1], entry[1], entry[2]) == 1 then
    added = added + 1
    redis.call('DEL', entry[5])
    redis.call('HSET', flow_key, entry[1], entry[4])
    if fair.join(entry[1], entry[6], entry[3], entry[7]) then wake = true end
  end
end
if wake then tolerant(0, 'RPUSH', KEYS[3], '1') end
return added
