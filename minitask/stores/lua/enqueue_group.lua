-- enqueue_group: enqueue_flow.lua for sends that hold grouped calls (fair queues,
-- docs/guide/fair-queues.rst). stores/scripts.py puts enqueue.lua and enqueue_flow.lua
-- in front as enqueue_base() and enqueue_flow_base(): this adds to them and copies
-- neither, and a send without a group never pays for it.
-- KEYS: enqueue_flow.lua's (enqueue.lua's, then flow), then leases (ZSET) and dead
--   (ZSET), read only to check a solo claim (flow.lua's owned()), then cancelled (ZSET:
--   a token is counted there while in a ready list), then the flow prefix last.
-- ARGV: enqueue_flow.lua's.
-- Returns: enqueue_flow.lua's count, plus the grouped messages added.
-- A grouped message due now (its spec names a group: flow.lua's flow_fair) goes to
-- its group's ready set, not to a ready list, with its spec, and puts its group in
-- the rotation; one due later is scheduled as any other (enqueue_flow.lua) and joins
-- its group when a fetch meets it in a ready list. An id already pending is left as
-- it is.
-- Invariant: enqueue_flow.lua's, and a grouped ready message is in its group's ready
-- set, never in a ready list, from the step that adds it.
-- A refusal part way (an ACL changed while a client sends): a grouped message's spec
-- and join come before its message, the write that makes its id pending (read
-- first), so the call sent again joins a task it had not finished once; a refusal
-- after the messages (groups_ready's count) leaves every task joined and running.
-- Data minitask did not write (lib.lua): messages of another type refuse the call,
-- before any write, and so does, for a grouped message due now, its group's ready set
-- or turn, or the ready list of its priority (its group's token goes there), naming
-- the task and its group: written past, the task would never run (a group's own keys
-- stop only that group's sends). Queue-wide keys every group shares are moved aside
-- instead (lib.lua's aside(): renamed to `key`:foreign, one WARNING in Redis's log),
-- once the call's checks have passed: flow (enqueue_flow.lua) and groups_solo, so one
-- planted key never stops the sends of every group.
local prefix = table.remove(KEYS)
local cancelled = table.remove(KEYS)
local dead = table.remove(KEYS)
local leases = table.remove(KEYS)
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
-- messages must be a hash (one HEXISTS: lib.lua's guards, made only for an error, then
-- refuse the call); flow is checked by enqueue_flow_base() before its first write
if type(redis.pcall('HEXISTS', KEYS[1], '')) == 'table' then guards().expect(KEYS[1], 'hash') end
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
-- A plain grouped spec (no limits, no expiry, no debounce, no group limits: PLAIN,
-- then the group) is read by one comparison, and its task, joining a group that has
-- neither a ready set nor a turn, is joined below without flow.lua's library (made,
-- it costs this call some 150,000 Redis instructions): entry[8] is its group. Any
-- other is read by flow.lua's flow_spec (entry[6]).
local PLAIN = '\n0\n0\n0\n0\n0\n0\n0\n0\n'
local solos, solos_other = prefix .. 'groups_solo', false
for _, entry in ipairs(grouped) do
  local group
  if #entry[4] > 17 and string.sub(entry[4], 1, 17) == PLAIN then
    group = string.sub(entry[4], 18)
    entry[8] = group
  else
    local spec = flow_control().spec(entry[4])
    entry[6] = spec
    group = spec and spec.group
  end
  if group then
    local base = prefix .. 'g:' .. group
    -- a group with neither, nor a claim in groups_solo (its first task this call):
    -- joined without reading them
    local no_ready = writable(base .. ':ready', 'zset', entry, group)
    entry[7] = writable(base .. ':turn', 'hash', entry, group) and no_ready
    if entry[7] then
      -- (one HEXISTS: a groups_solo of another type is moved aside once the checks have
      -- passed, below, and holds no claim; guards().foreign raises any other error)
      local held = redis.pcall('HEXISTS', solos, group)
      if type(held) == 'table' then
        guards().foreign(held)
        solos_other = true
      end
      if held == 1 then entry[7] = false end
    end
    writable(KEYS[13 - entry[3]], 'list', entry, group)
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
-- (every check has passed: a groups_solo of another type is moved aside before a write)
if solos_other then guards().aside(solos, guards().held_other('hash')) end

-- fair: flow.lua's fair queues, made at the first task that is not joined inline
-- below; any_paused: whether any group is paused (one EXISTS, read at the first
-- plain task); solo: the tasks joined to a set inline, counted in groups_ready by one
-- INCRBY
local fair, any_paused, solo = nil, nil, 0
local wake = false
local RANK = 100000000000000  -- flow.lua's: orders below it, priorities above

-- A plain task joining a group in its set form (a ready set, and a turn claiming a
-- live token of that form: '+' first, or no task in it): flow.lua's join() and arm()
-- inline, the same reads and writes. The claim is read first: for any other (a solo
-- group's, which the join turns into a set; one that is no claim minitask writes; a
-- gen that is no count), false, and nothing written (the library's join then).
-- 'arm' when the task is in its set but its group's token may not stay (a band
-- below its first task's, one task in the set): the library's arm() decides.
local function join_set(entry, group)
  local turn, ready = prefix .. 'g:' .. group .. ':turn', prefix .. 'g:' .. group .. ':ready'
  local live = redis.call('HMGET', turn, 'tok', 'band')  -- (a hash: checked above)
  local tok, band = live[1], live[2]
  if type(tok) ~= 'string' or type(band) ~= 'string' or not string.find(band, '^%d$') then
    return false
  end
  local plus = string.byte(tok) == 43  -- '+'
  local after = string.match(plus and string.sub(tok, 2) or tok, '^%-?%d+%.%-?%d+(.?)')
  if not (after == '' or (plus and (after == '/' or after == ':'))) then return false end
  local order = redis.pcall('HINCRBY', turn, 'gen', '1')
  if type(order) ~= 'number' then return false end
  local priority = entry[3]
  local member = string.sub('0123456789', priority + 1, priority + 1) .. entry[1]
  if redis.call('ZADD', ready, (9 - priority) * RANK + order, member) == 1 then
    solo = solo + 1
    tolerant(0, 'ZINCRBY', prefix .. 'groups', '1', group)
  end
  local head = redis.call('ZRANGE', ready, '0', '1')
  local first = head[1] and string.byte(head[1])
  if head[2] and first and first >= 48 and first <= 57 and tonumber(band) >= first - 48 then
    return true  -- its group's live token stays: nothing pushed, none to wake
  end
  return 'arm'
end

for _, entry in ipairs(grouped) do
  -- an id pending is left as it is: read first, and its message, which makes it
  -- pending, written after it joined its group (below): a call refused part way (an
  -- ACL changed while a client sends) leaves the task unpending, and the call sent
  -- again joins it once (its group's ready set is a set); written first, a refusal
  -- after it left the task in no group, and the call sent again found it pending
  if redis.call('HEXISTS', KEYS[1], entry[1]) == 0 then
    added = added + 1
    redis.call('DEL', entry[5])
    redis.call('HSET', flow_key, entry[1], entry[4])
    local group = entry[8]
    if group and any_paused == nil then
      any_paused = redis.pcall('EXISTS', prefix .. 'groups_paused')
    end
    local joined = group and any_paused == 0 and not entry[7] and join_set(entry, group)
    if joined then
      if joined == 'arm' then
        fair = fair or flow_control().fair({prefix = prefix, first_ready = 4, now = ARGV[1],
                                            cancelled = cancelled, messages = KEYS[1],
                                            flow = flow_key, leases = leases, dead = dead,
                                            delayed = KEYS[2]})
        if fair.arm(group, false, false) then wake = true end
      end
    elseif group and entry[7] and any_paused == 0 then
      -- a plain task joining a group with neither a ready set, a turn nor a claim in
      -- groups_solo, none paused: what flow.lua's join() does for it (a solo group: its
      -- task held in its token, at the tail of its priority's list; the claim, its
      -- first generation, 1, then lib.lua's PLAIN_SOLO_CLAIM, ':', its spec being
      -- plain, in groups_solo only; its token counts its task in the list), inline.
      -- Its keys' types were checked above (writable()): a write to groups_solo or the
      -- list meets no other type
      local digit = string.sub('0123456789', entry[3] + 1, entry[3] + 1)
      local gen = ARGV[1] .. '.1' .. PLAIN_SOLO_CLAIM .. digit .. entry[1]
      redis.call('HSET', solos, group, gen)
      redis.call('RPUSH', KEYS[13 - entry[3]], '\255' .. gen .. '\255' .. group)
      wake = true
    else
      fair = fair or flow_control().fair({prefix = prefix, first_ready = 4, now = ARGV[1],
                                          cancelled = cancelled, messages = KEYS[1],
                                          flow = flow_key, leases = leases, dead = dead,
                                          delayed = KEYS[2]})
      local spec = entry[6] or (group and flow_control().spec(entry[4]))
      if fair.join(entry[1], spec, entry[3], entry[7]) then wake = true end
    end
    redis.call('HSET', KEYS[1], entry[1], entry[2])
  end
end
if solo > 0 then
  -- the tasks joined inline, in groups_ready (a count that is no integer starts afresh:
  -- lib.lua's recount)
  local total, key = prefix .. 'groups_ready', nil
  key, total = total, redis.pcall('INCRBY', total, solo == 1 and '1' or solo)
  if type(total) == 'table' then total = guards().recount(total, key, solo) end
  if total and total <= 0 then redis.call('DEL', key) end
end
if wake then tolerant(0, 'RPUSH', KEYS[3], '1') end
return added
