-- cancel: withdraw a task that has not started; it will never run.
-- KEYS[1] delayed (ZSET)   KEYS[2] leases (ZSET)   KEYS[3] dead (ZSET)
-- KEYS[4] messages (HASH)  KEYS[5] retrying (HASH)   KEYS[6] result (LIST)
-- KEYS[7] deliveries (HASH)   KEYS[8] order (HASH)   KEYS[9] cancelled (ZSET)
-- KEYS[10] flow (HASH): the task's flow spec, if any, goes with it
-- KEYS[11] the flow prefix   KEYS[12] flow_due (ZSET)   KEYS[13] wake (LIST): a
--   retried task of a fair queue holds its group_max_running slot while scheduled;
--   cancelled, it frees it (flow.lua's finish), and its group is tried again
-- KEYS[14] recent (STREAM): the queue's record of recent outcomes (lib.lua's remember)
-- KEYS[15] flow_limiters (SET)   KEYS[16] flow_parked (STRING)
-- ARGV[1] id   ARGV[2] encoded outcome (cancelled)   ARGV[3] result ttl (ms)
-- ARGV[4] the task's priority (read from its message by the caller)
-- ARGV[5] the record's length   ARGV[6] the task's entry in it ('': none)
-- Returns: 1 when cancelled, 0 when the task is running, finished, dead or unknown.
-- A cancelled ready task keeps its ready-list entry; without its message,
-- fetch drops it. That keeps cancel O(1) however long the queue; the id waits in
-- cancelled, at its priority, until then, so that counts can leave it out.
-- A grouped ready task (fair queues: its spec names its group) is not in a ready
-- list but in its group's ready set, or held in its solo group's token: it leaves
-- them here (withdraw, below), and its group's counts go down in the same step, so
-- status never counts it; it needs no entry in cancelled. Removing a member of a
-- sorted set moves no other: the group's order and its token's place are kept.
-- A task its limits park (flow control: in its limiter's park list, fetch.lua) leaves
-- the list here (unpark, below) and flow_parked goes down in the same step, so that
-- status counts it no more; it needs no entry in cancelled either. Its entry is
-- looked for among the first PARK_SCAN of the list (a cancel stays bounded however
-- many are parked): one parked deeper goes to cancelled, and the fetch that reaches
-- it drops it (counted as parked until then).
-- Data minitask did not write (lib.lua): a cancel never fails on it. A key of
-- another type counts as empty (cancelled of another type: the id is not left
-- out of the counts); a result key is replaced whole. A grouped spec that does not
-- parse names no group: the id goes to cancelled, and the fetch that meets it in
-- its group drops it there (flow.lua's serve).
-- Refused part way (an ACL changed since the check; Redis keeps the writes a script
-- made before a refused command): every command the script may run after its first
-- write, on each key it may run it on (calls(), below: the outcome's, the withdraw's,
-- unpark's, flow.lua's finish's, the record's XADD; its reads too), is asked about
-- before that write (Redis 7.0 and later: lib.lua's writable), so that a refusal
-- changes nothing: the task is where it was, and runs. A refused HDEL had left a
-- delayed task out of delayed with a cancelled outcome and its message kept (status
-- queued for ever, never run) while cancel() raised; a refused XADD raised with the
-- task cancelled. Redis 6.2 cannot be asked, and its ACL names commands, not commands
-- by key: there the outcome is written first (its DEL and PEXPIRE tried on the
-- result just deleted), then each command is tried once on the outcome's list, where
-- it changes nothing (tried(), below): one refused takes the outcome back and is
-- raised, before the task is touched. Not asked: the RENAME (and EXISTS) that moves a
-- key of another type aside (lib.lua's aside, data minitask did not write).
local id = ARGV[1]

-- Take the ready task `id` out of `group`, which its flow spec names (group_of;
-- KEYS[11]: the flow prefix, flow.lua's names): from its group's ready set (its member is a
-- priority digit and the id, any digit tried: the caller's priority may be unknown;
-- or the id alone, one with no digit first, as flow.lua's task_of reads it), or
-- from its solo group's claim. The queue's and the group's counts go down by one; a
-- group left with no ready task leaves its turn and its groups and flow_due entries
-- (its token, if one is in a ready list, is stale then: the fetch that meets it drops
-- it, as after purge_ready.lua). A solo group's claim in groups_solo (':', flow.lua)
-- is its one key: it goes, and its token, which counted the task in its ready list,
-- goes to cancelled, so that counts leave it out until that fetch. Slots held by
-- running tasks stay theirs. False when it is in no group (ungrouped, on its way back
-- in a ready list, or not found).
local function withdraw(group)
  if not group then return false end
  local prefix = KEYS[11]
  local ready, turn = prefix .. 'g:' .. group .. ':ready', prefix .. 'g:' .. group .. ':turn'
  local members = {}
  for digit = 0, 9 do members[digit + 1] = digit .. id end
  local first = string.byte(id)
  if not (first and first >= 48 and first <= 57) then members[11] = id end
  local left, removed = 0, tolerant(0, 'ZREM', ready, unpack(members))
  if removed > 0 then
    left = tolerant(0, 'ZCARD', ready)
  else
    local solos = prefix .. 'groups_solo'
    local claim = tolerant(false, 'HGET', solos, group)
    local digit, member = string.match(claim or '', '^%-?%d+%.%d+:([0-9])(.*)$')
    if member == id then
      tolerant(0, 'HDEL', solos, group)
      tolerant(0, 'ZADD', KEYS[9], digit, '\255' .. claim .. '\255' .. group)
      tolerant(0, 'ZREM', KEYS[12], 'g:' .. group)
      return true
    end
    -- a solo group's claim: a generation, '/' (or ':', flow.lua), then its task's member
    local member = string.match(tolerant(false, 'HGET', turn, 'tok') or '',
                                '^%-?%d+%.%d+[/:](.*)$')
    local digit = member and string.byte(member)
    if digit and digit >= 48 and digit <= 57 then member = string.sub(member, 2) end
    if member ~= id then return false end
    removed = 1
  end
  -- (a count that is no integer starts afresh: lib.lua's recount)
  local total = prefix .. 'groups_ready'
  local count = redis.pcall('INCRBY', total, -removed)
  if type(count) == 'table' then count = guards().recount(count, total, -removed) end
  if count and count <= 0 then redis.call('DEL', total) end
  if left > 0 then
    tolerant(0, 'ZINCRBY', prefix .. 'groups', -removed, group)
  else
    tolerant(0, 'DEL', turn)
    tolerant(0, 'ZREM', prefix .. 'groups', group)
    tolerant(0, 'ZREM', KEYS[12], 'g:' .. group)
  end
  return true
end

-- Take the parked task `id` out of the park list of the limiter its flow spec `text`
-- names (its entry: its priority's digit, then the id), and lower flow_parked; a list
-- left empty leaves flow_due and flow_limiters (as fetch.lua's unpark). False when it
-- is not found there (in a ready list, or parked deeper than PARK_SCAN).
local PARK_SCAN = 10000
local function unpark(text)
  local limiter = text and string.match(text, '^([^\n]+)\n')
  local priority = tonumber(ARGV[4])
  if not limiter or not priority or priority < 0 or priority > 9 then return false end
  local park, entry = KEYS[11] .. limiter .. ':park', ARGV[4] .. id
  if not tolerant(false, 'LPOS', park, entry, 'MAXLEN', PARK_SCAN) then return false end
  tolerant(0, 'LREM', park, 1, entry)  -- stops at the entry LPOS found
  if tolerant(0, 'LLEN', park) == 0 then
    tolerant(0, 'ZREM', KEYS[12], limiter)
    tolerant(0, 'SREM', KEYS[15], limiter)
  end
  -- (a count that is no integer starts afresh: lib.lua's recount)
  local count = redis.pcall('INCRBY', KEYS[16], -1)
  if type(count) == 'table' then count = guards().recount(count, KEYS[16], -1) end
  if count and count <= 0 then redis.call('DEL', KEYS[16]) end
  return true
end

-- The group a ready task's flow spec `text` names (fair queues), or nil.
local function group_of(text)
  return text and string.match(
    text, '^[^\n]*\n%d+\n%d+\n%d+\n%d+\n%d\n%d+\n%d+\n%d+\n(.+)$')
end

-- Every command the script may run after its first write, each on its key as it will
-- be sent (its other arguments may differ: the ACL reads the command and its keys), for
-- a task `scheduled` or ready, of the flow spec `spec` naming the group `group` (a ready
-- task's): a little more than it runs (the withdraw's branches, unpark's and the ready
-- list's alike), never less.
local function calls(scheduled, spec, group)
  local prefix, list = KEYS[11], {}
  local function add(...) list[#list + 1] = {...} end
  add('DEL', KEYS[6]); add('RPUSH', KEYS[6], ARGV[2]); add('PEXPIRE', KEYS[6], ARGV[3])
  if scheduled then
    add('ZREM', KEYS[1], id); add('HDEL', KEYS[8], id)
  else
    add('ZADD', KEYS[9], '0', id)
    if group then  -- withdraw
      local ready, turn = prefix .. 'g:' .. group .. ':ready', prefix .. 'g:' .. group .. ':turn'
      local solos, total, groups = prefix .. 'groups_solo', prefix .. 'groups_ready',
                                   prefix .. 'groups'
      add('ZREM', ready, id); add('ZCARD', ready); add('HGET', solos, group)
      add('HDEL', solos, group); add('ZREM', KEYS[12], 'g:' .. group); add('HGET', turn, 'tok')
      add('INCRBY', total, '-1'); add('DEL', total); add('ZINCRBY', groups, '-1', group)
      add('DEL', turn); add('ZREM', groups, group)
    end
    local limiter = spec and string.match(spec, '^([^\n]+)\n')
    if limiter then  -- unpark
      local park = prefix .. limiter .. ':park'
      add('LPOS', park, id); add('LREM', park, '1', id); add('LLEN', park)
      add('ZREM', KEYS[12], limiter); add('SREM', KEYS[15], limiter)
      add('INCRBY', KEYS[16], '-1'); add('DEL', KEYS[16])
    end
  end
  add('HDEL', KEYS[4], id); add('HDEL', KEYS[5], id); add('HDEL', KEYS[7], id)
  add('HDEL', KEYS[10], id); add('HMGET', KEYS[10], id)
  if spec then  -- flow.lua's finish: the slots its spec holds
    local limiter = string.match(spec, '^([^\n]+)\n%d+\n%d+\n[1-9]')
    local held = string.match(spec, '^[^\n]*\n%d+\n%d+\n%d+\n%d+\n%d\n[1-9]%d*\n%d+\n%d+\n(.+)$')
    if limiter then
      add('SREM', prefix .. limiter .. ':running', id); add('LLEN', prefix .. limiter .. ':park')
    end
    if held then
      add('SREM', prefix .. 'g:' .. held .. ':running', id)
      add('ZCARD', prefix .. 'g:' .. held .. ':ready')
    end
    if limiter or held then add('ZADD', KEYS[12], '0', id); add('RPUSH', KEYS[13], '1') end
  end
  if ARGV[6] ~= '' then
    add('XADD', KEYS[14], 'MAXLEN', '~', ARGV[5], '*', 'e', ARGV[6], 'n', ARGV[5])
  end
  return list
end

-- Redis 6.2: each command of `wanted` (calls()) but the outcome's own, tried once on
-- the outcome's list (KEYS[6], holding the outcome alone), where it changes nothing: one
-- of another type fails WRONGTYPE after the ACL let it run; LREM of '' and LPOS find
-- nothing. One the ACL refuses takes the outcome back (DEL, run already) and is raised.
local TRIES = {ZREM = {'-'}, HDEL = {'-'}, SREM = {'-'}, LREM = {'1', ''}, ZADD = {'0', '-'},
               ZINCRBY = {'0', '-'}, INCRBY = {'0'}, XADD = {'*', 'e', '-'}, HGET = {'-'},
               HMGET = {'-'}, ZCARD = {}, LPOS = {''}, LLEN = {}}
local function tried(wanted)
  local done = {DEL = true, RPUSH = true, PEXPIRE = true}
  for _, call in ipairs(wanted) do
    local command = call[1]
    if not done[command] then
      done[command] = true
      local reply = redis.pcall(command, KEYS[6], unpack(TRIES[command]))
      if type(reply) == 'table' and reply.err and guards().refused(reply) then
        redis.call('DEL', KEYS[6])
        error(reply.err, 0)
      end
    end
  end
end

local spec, group  -- the task's flow spec, if any, and the group a ready one's names
local scheduled = tolerant(false, 'ZSCORE', KEYS[1], id) ~= false
if not scheduled then
  if tolerant(false, 'ZSCORE', KEYS[2], id) or tolerant(false, 'ZSCORE', KEYS[3], id) then
    return 0
  end
  if tolerant(0, 'HEXISTS', KEYS[4], id) == 0 then return 0 end
end
spec = tolerant(false, 'HGET', KEYS[10], id)
if not scheduled then group = group_of(spec) end
-- every command the script may run from here on, asked about before the first write
-- (7.0 and later; 6.2: tried once the outcome is written, below), and the outcome
-- written before the task is withdrawn: refused, nothing of the task has changed (a
-- result key of any type is replaced whole)
local wanted = calls(scheduled, spec, group)
if redis.acl_check_cmd then
  local writable = guards().writable
  for _, call in ipairs(wanted) do writable(unpack(call)) end
end
redis.call('DEL', KEYS[6])
redis.call('PEXPIRE', KEYS[6], ARGV[3])  -- (none there now: 6.2 tries it, nothing changes)
redis.call('RPUSH', KEYS[6], ARGV[2])
if not redis.acl_check_cmd then tried(wanted) end
redis.call('PEXPIRE', KEYS[6], ARGV[3])
if scheduled then
  tolerant(0, 'ZREM', KEYS[1], id)
  tolerant(0, 'HDEL', KEYS[8], id)
elseif not withdraw(group) and not unpark(spec) then
  -- a ready-list entry waits in cancelled until a fetch drops it; a grouped task
  -- leaves its group at once, a parked one its park list
  tolerant(0, 'ZADD', KEYS[9], ARGV[4], id)
end
tolerant(0, 'HDEL', KEYS[4], id)
tolerant(0, 'HDEL', KEYS[5], id)
tolerant(0, 'HDEL', KEYS[7], id)
if scheduled then
  flow_control().finish(KEYS[10], KEYS[11], KEYS[12], KEYS[13], {id}, true)
elseif spec and string.find(spec, '^[^\n]*\n%d+\n%d+\n%d+\n%d+\n%d\n[1-9]') then
  -- a ready task of a group_max_running may hold its slot (given back, its lease
  -- expired: waiting to run again): it frees it, as a scheduled one does
  flow_control().finish(KEYS[10], KEYS[11], KEYS[12], KEYS[13], {id}, true)
else
  tolerant(0, 'HDEL', KEYS[10], id)
end
remember(KEYS[14], ARGV[5], ARGV[6])
return 1
