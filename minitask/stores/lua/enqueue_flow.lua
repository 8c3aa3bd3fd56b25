-- enqueue_flow: enqueue.lua for calls with flow control (limits, expiry,
-- debounce). stores/scripts.py wraps enqueue.lua as enqueue_base() and puts this
-- after it, so this script adds to the plain enqueue and never copies it.
-- KEYS: enqueue.lua's, then flow (HASH) last.
-- ARGV: enqueue.lua's, then one flow spec per message (flow.lua; limits.py packs
--   it), then how many messages there are.
-- Returns: enqueue.lua's count of messages added, plus those a debounce replaced.
-- A new message gets its spec in the flow hash in the same step. A debounced call
-- (its spec's sixth line is 1: limits.pack; a grouped spec goes on past it, with
-- its group last, so the flag is read by its place, never at the end) whose id is still scheduled (delayed) replaces that call's
-- message, due time and spec (a call of a group with group_max_running keeps its
-- group); an id queued or running already is left as it is.
-- Invariant: a flow-controlled message is never in Redis without its spec, written
-- before enqueue_base() queues it (a refusal part way: no task runs without its limits). (Its
-- limiter is named in flow_limiters only while a fetch has tasks of it parked.)
-- Data minitask did not write (lib.lua): a flow hash of another type holds no spec
-- minitask wrote: it is moved aside (lib.lua's aside(): renamed to flow:foreign, one
-- WARNING in Redis's log) once enqueue_base() has made its checks, and the call goes
-- on; a delayed set of another type is no schedule. Messages of another type refuse
-- the call before any write; a ready list of another type (enqueue_base()'s first
-- push) refuses it after the new messages' specs, which are then taken back (below).
local count = tonumber(table.remove(ARGV))
local specs = {}
for n = count, 1, -1 do specs[n] = table.remove(ARGV) end
local flow = table.remove(KEYS)
-- (one HEXISTS: lib.lua's guards, made only for an error: any but WRONGTYPE raises)
local flow_other = redis.pcall('HEXISTS', flow, '')
flow_other = type(flow_other) == 'table' and guards().foreign(flow_other)
local pending = {}
for n = 1, count do
  local held = redis.pcall('HEXISTS', KEYS[1], ARGV[4 * n])
  -- messages of another type: refused here, before the specs below (enqueue_base()
  -- would refuse the call after them)
  if held ~= 0 and held ~= 1 then guards().must('hash', 'HEXISTS', KEYS[1], ARGV[4 * n]) end
  pending[n] = held == 1
end

-- a new message's spec before enqueue_base() makes it fetchable: a call refused part
-- way (an ACL changed while a client sends) never leaves a task queued without its
-- limits. Refused, the specs of ids that did not become pending are taken back: left,
-- a later send of the same id with no limits was parked under them, and any spec
-- held put every fetch of the queue on flow control's path.
local done, added = true, nil
if not flow_other then
  for n = 1, count do
    if not pending[n] then
      local written = redis.pcall('HSET', flow, ARGV[4 * n], specs[n])
      -- (an error raised as Redis said it: a full Redis's OOM named as such)
      if type(written) == 'table' then done, added = false, written.err break end
    end
  end
  if done then done, added = pcall(enqueue_base) end
  if not done then
    local kept  -- a refused HDEL (an ACL without it): the error says so
    for n = 1, count do
      local id = ARGV[4 * n]
      if not pending[n] and redis.pcall('HEXISTS', KEYS[1], id) ~= 1 then
        local gone = redis.pcall('HDEL', flow, id)
        if type(gone) == 'table' then kept = gone.err end
      end
    end
    if kept then
      kept = '; the flow specs (limits) of ids not queued stay in ' .. flow .. ': ' .. kept
      if type(added) == 'table' then added.err = added.err .. kept
      else added = added .. kept end
    end
    error(added, 0)  -- the error enqueue_base() raised, as it raised it
  end
else
  added = enqueue_base()
end
-- (enqueue_base() has made its checks: a refused call changed nothing)
if flow_other then guards().aside(flow, guards().held_other('hash')) end

local wake = false
for n = 1, count do
  local i = 4 * n
  local id, spec = ARGV[i], specs[n]
  if not pending[n] then
    -- enqueue_base() added it: an id not pending is always added (or the call failed);
    -- its spec written above, or here once a flow hash of another type is moved aside
    if flow_other then redis.call('HSET', flow, id, spec) end
  elseif string.match(spec, '^[^\n]*\n%d+\n%d+\n%d+\n%d+\n(%d+)') == '1'
      and tolerant(false, 'ZSCORE', KEYS[2], id) then
    local priority, due = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
    -- a call of a group with group_max_running keeps that group (the part of its spec
    -- after the sixth line): a retry waiting here holds the group's slot, which only
    -- its own group's finish frees; moved, it would hold that group for good
    local old = tolerant(false, 'HGET', flow, id)
    local kept = old and string.match(old, '^[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n'
                                            .. '[^\n]*(\n[1-9]%d*\n.*)$')
    if kept then
      spec = string.match(spec, '^[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*') .. kept
    end
    redis.call('HSET', KEYS[1], id, ARGV[i + 1])
    redis.call('ZADD', KEYS[2], string.format('%.0f', due * 10 + 9 - priority), id)
    tolerant(0, 'HSET', KEYS[14], id, guards().bump(KEYS[15]))
    redis.call('HSET', flow, id, spec)
    added = added + 1
    if redis.call('ZRANGE', KEYS[2], 0, 0)[1] == id then wake = true end
  end
end
if wake then tolerant(0, 'RPUSH', KEYS[3], '1') end
return added
