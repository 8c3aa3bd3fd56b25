-- promote: a library, not a script of its own. The queue store puts it in front
-- of enqueue.lua, fetch.lua, revive.lua, spawn.lua and schedule_fire.lua (after
-- lib.lua), which promote due delayed tasks before they append to a ready list,
-- so a task that fell due
-- earlier is never queued behind one added after that (and no extra script call
-- is paid on the hot paths). Due tasks move to the tail of their ready lists, in
-- the order in which they fell due (equal due times: the order in which they
-- were scheduled).
-- due_batch(delayed, order, first_ready, now, limit) reads what is due; it returns
-- that batch (nil: nothing is due), and false when the delayed set holds another
-- type. promote(delayed, order, batch) moves it, and must be the script's first write
-- (bar a key moved aside). The caller makes its own checks between the two, so all
-- come before any write.
--   delayed (ZSET) and order (HASH): key names, taken from the caller's KEYS
--   first_ready: index in KEYS of the priority 9 ready list; priority p's list is
--     KEYS[first_ready + 9 - p]
--   now (ms); limit: tasks moved at most (a number, or its text: fetch.lua passes
--     ARGV as it came, so that Redis is sent no number to format)
--   horizon (optional): now * 10 + 9 as text, when the caller has it without a
--     string.format (a number's formatting costs Redis about 3,000 instructions)
-- Invariant: a promoted id leaves delayed and order in the step that queues it.
-- Data minitask did not write (lib.lua): a score that is no whole number but is
-- due (1.5, -5, -inf) is promoted at priority 0, the one it cannot tell; the
-- message keeps its own. A score beyond the year 9999 (inf included) is never
-- due. A sequence in order that is no number counts as 0. A delayed set or an
-- order hash of another type counts as empty; a ready list of another type that
-- a due task goes to is moved aside whole (lib.lua's aside(): to `key`:foreign, said
-- in Redis's log) and made again with the task: refusing the call would stop every
-- fetch of the queue, and every send to it, until someone fixed the key.
-- A member longer than any id minitask writes (ID_MOST: wire.message.MAX_ID_BYTES) is
-- no task of ours: a planted one of 50 MB was pushed whole into a ready list, and read
-- whole by every fetch after. It is measured as it is read and removed there, before
-- any key is built from it or any other call is made with it (one ZREM), and told
-- (overlong_dropped(): in Redis's log, and in OVERLONG: 'key length' lines a fetch
-- returns for its worker's log), so that it costs once. Its content is never said.
local ID_MOST = 200
-- A ready list's (or park list's, or cancelled's) entry: an id, or a group's token
-- ('\255' generation '/' (or ':') digit id '\255' group: some 1,050 bytes at most, a group
-- of 200 characters of 4 bytes each)
local ENTRY_MOST = 1100
local OVERLONG
local function overlong_dropped(key, length)
  OVERLONG = OVERLONG or {}
  OVERLONG[#OVERLONG + 1] = key .. ' ' .. length
  redis.log(redis.LOG_WARNING, 'minitask: dropped an entry of ' .. length .. ' bytes from '
            .. key .. ', longer than any minitask writes there (not minitask\'s)')
end

local function due_batch(delayed, order, first_ready, now, limit, horizon)
  horizon = horizon or string.format('%.0f', now * 10 + 9)
  local due = redis.pcall('ZRANGEBYSCORE', delayed, '-inf', horizon, 'WITHSCORES', 'LIMIT', '0',
                          limit)
  if due.err then
    guards().foreign(due)
    return nil, false
  end
  if #due == 0 then return nil, true end
  local batch = {}
  -- A full batch may cut the last run of equal scores, whose members the ZSET orders
  -- by id: leave that run whole for the next call. Only a run longer than the whole
  -- batch (more than `limit` tasks due in one ms at one priority) is moved a batch
  -- at a time.
  local cut = #due == 2 * limit and due[2] ~= due[#due]
  for i = 1, #due, 2 do
    if #due[i] > ID_MOST then
      redis.call('ZREM', delayed, due[i])  -- no task of ours (above): once
      overlong_dropped(delayed, #due[i])
    elseif not (cut and due[i + 1] == due[#due]) then
      local sequence = tonumber(tolerant(false, 'HGET', order, due[i]))
      if not sequence or sequence ~= sequence then sequence = 0 end  -- text, nan
      batch[#batch + 1] = {due[i], tonumber(due[i + 1]), sequence,
                           guards().band_of(due[i + 1], first_ready)}
    end
  end
  table.sort(batch, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[3] < b[3]
  end)
  return batch, true
end

local function promote(delayed, order, batch)
  if not batch then return 0 end
  for _, task in ipairs(batch) do
    local ready = KEYS[task[4]]
    -- a ready list of another type is moved aside whole (lib.lua's displaced()), and
    -- the push made again: a due task never stops its queue
    local pushed = redis.pcall('RPUSH', ready, task[1])
    if type(pushed) == 'table' then
      guards().displaced(pushed, ready, 'list')
      redis.call('RPUSH', ready, task[1])
    end
    redis.call('ZREM', delayed, task[1])
    tolerant(0, 'HDEL', order, task[1])
  end
  return #batch
end

-- promote_due(delayed, order, first_ready, now, limit): both steps at once (a
-- workflow's spawn, a schedule's fire), for a script that makes its checks before it:
-- due_batch() may write too (an overlong entry's removal).
local function promote_due(delayed, order, first_ready, now, limit)
  return promote(delayed, order, (due_batch(delayed, order, first_ready, now, limit)))
end
