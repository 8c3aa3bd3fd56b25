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
-- Refused part way (an ACL changed since the check): a grouped task's withdraw asks
-- whether groups_ready may be lowered before the task leaves its set (lib.lua's
-- countable): refused after, the task stayed out of its set uncancelled, never run.
-- Its outcome is asked about before any write (Redis 7.0 and later: lib.lua's
-- writable) and written before the task is withdrawn (on 6.2, which cannot be asked,
-- its PEXPIRE tried on the result just deleted): a refused RPUSH after the message
-- was gone lost the task (no message, no outcome); refused now, the task is as it was.
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

local spec, group  -- a ready task's flow spec, if any, and the group it names (read below)
local scheduled = tolerant(false, 'ZSCORE', KEYS[1], id) ~= false
if not scheduled then
  if tolerant(false, 'ZSCORE', KEYS[2], id) or tolerant(false, 'ZSCORE', KEYS[3], id) then
    return 0
  end
  if tolerant(0, 'HEXISTS', KEYS[4], id) == 0 then return 0 end
  spec = tolerant(false, 'HGET', KEYS[10], id)
  group = group_of(spec)
  -- the queue's count, lowered after the task leaves its group's set, asked first
  -- (lib.lua's countable): refused after, the task left its set uncancelled and the
  -- count stayed
  if group then guards().countable('INCRBY', KEYS[11] .. 'groups_ready') end
end
-- the outcome, asked about before the first write, and written before the task is
-- withdrawn: refused, nothing of the task has changed (it was lost: no message, no
-- outcome); a result key of any type is replaced whole
if redis.acl_check_cmd then
  local writable = guards().writable
  writable('DEL', KEYS[6])
  writable('RPUSH', KEYS[6], ARGV[2])
  writable('PEXPIRE', KEYS[6], ARGV[3])
end
redis.call('DEL', KEYS[6])
redis.call('PEXPIRE', KEYS[6], ARGV[3])  -- (none there now: 6.2 tries it, nothing changes)
redis.call('RPUSH', KEYS[6], ARGV[2])
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
