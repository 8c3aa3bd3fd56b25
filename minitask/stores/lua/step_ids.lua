-- step_ids: reserve the explicit task ids a new workflow gives its steps in one
-- queue, or say which are taken, writing nothing then; or release them again.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] retrying (HASH)
-- KEYS[4] dead (ZSET)     KEYS[5] messages (HASH)
-- KEYS[5 + n] the marker (HASH, keys.py: once:<id>) of the n-th id
-- ARGV[1] 'reserve' or 'release'   ARGV[2] the workflow's id ('': a lone task, sent
-- at once: its ids are checked, not reserved)
-- ARGV[3] how long a reservation lives (ms: the workflow's longest result ttl)
-- ARGV[4] the longest workflow id minitask writes (a longer one is not read)
-- ARGV[4 + n] the n-th id
-- Returns, to 'reserve': {} when every id was free and is now reserved, else
-- {id, why, other workflow or ''} for each id taken, nothing written: why is
-- running, scheduled, retrying, dead or queued (a task holds the id), step (a step
-- of an earlier workflow was sent or cancelled with it: its marker lives as long
-- as its result) or reserved (a workflow sent before, still pending, gives the id to
-- a step it has not sent yet). To 'release': how many reservations were dropped.
--
-- A reservation is the step's marker before it is sent: field w (the workflow) and
-- no field state. spawn.lua sends a step whose marker has no state (HSETNX), and
-- then keeps the marker as long as the workflow's longest result; a second workflow naming the
-- same id is refused at delay() instead of waiting for ever for a step never sent.
-- Data minitask did not write: a queue key of another type holds no task (read as
-- empty); a marker of another type refuses the call, naming the key and its type,
-- before any write; a workflow id longer than ARGV[4] is not read.
local wid, ttl, most = ARGV[2], ARGV[3], tonumber(ARGV[4])

local function holds(i, command, id)
  local reply = redis.pcall(command, KEYS[i], id)
  if type(reply) == 'table' and reply.err then
    guards().foreign(reply)  -- raises any other error
    return false
  end
  return reply
end

if ARGV[1] == 'release' then
  local dropped = 0
  if wid == '' then return 0 end
  for n = 5, #ARGV do
    local marker = KEYS[n + 1]
    if redis.call('TYPE', marker)['ok'] == 'hash' and redis.call('HEXISTS', marker, 'state') == 0
        and redis.call('HSTRLEN', marker, 'w') == #wid
        and redis.call('HGET', marker, 'w') == wid then
      redis.call('DEL', marker)
      dropped = dropped + 1
    end
  end
  return dropped
end

local taken, free = {}, {}
for n = 5, #ARGV do
  local id, marker = ARGV[n], KEYS[n + 1]
  local why, other = false, ''
  if holds(1, 'ZSCORE', id) then
    why = 'running'
  elseif holds(2, 'ZSCORE', id) then
    why = holds(3, 'HEXISTS', id) == 1 and 'retrying' or 'scheduled'
  elseif holds(4, 'ZSCORE', id) then
    why = 'dead'
  elseif holds(5, 'HEXISTS', id) == 1 then
    why = 'queued'
  else
    local kind = redis.call('TYPE', marker)['ok']
    if kind == 'hash' and redis.call('HEXISTS', marker, 'state') == 1 then
      why = 'step'
    elseif kind ~= 'hash' and kind ~= 'none' and ARGV[1] == 'reserve' then
      error('WRONGTYPE minitask key ' .. marker .. ' holds a ' .. kind .. ', not the hash ' ..
            'of a step marker minitask keeps there (data minitask did not write): ' ..
            'nothing of the workflow was sent', 0)
    elseif kind == 'hash' then
      local length = redis.call('HSTRLEN', marker, 'w')
      if length > most then
        why = 'reserved'
      elseif length > 0 then
        other = redis.call('HGET', marker, 'w')
        if other ~= wid then why = 'reserved' else other = '' end
      end
    end
    if not why and (kind == 'hash' or kind == 'none') then free[#free + 1] = marker end
  end
  if why then
    taken[#taken + 1] = id
    taken[#taken + 1] = why
    taken[#taken + 1] = other
  end
end
if #taken > 0 or wid == '' then return taken end
for _, marker in ipairs(free) do
  redis.call('HSET', marker, 'w', wid)
  redis.call('PEXPIRE', marker, ttl)
end
return {}
