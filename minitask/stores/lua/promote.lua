-- promote: a library, not a script of its own. The queue store puts it in front
-- of enqueue.lua, fetch.lua and revive.lua, which call promote_due() before they
-- append to a ready list, so a task that fell due earlier is never queued behind
-- one added after that (and no extra script call is paid on the hot paths).
-- promote_due(delayed, order, first_ready, now, limit) moves due delayed tasks to
-- the tail of their ready lists, in the order in which they fell due (equal due
-- times: the order in which they were scheduled).
--   delayed (ZSET) and order (HASH): key names, taken from the caller's KEYS
--   first_ready: index in KEYS of the priority 9 ready list; priority p's list is
--     KEYS[first_ready + 9 - p]
--   now (ms); limit: tasks moved at most
-- Returns: how many tasks were promoted.
-- Invariant: a promoted id leaves delayed and order in the step that queues it.
local function promote_due(delayed, order, first_ready, now, limit)
  local horizon = string.format('%.0f', now * 10 + 9)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', horizon, 'WITHSCORES', 'LIMIT', 0,
                         limit)
  if #due == 0 then return 0 end
  -- A full batch may cut the last run of equal scores, whose members the ZSET orders
  -- by id: leave that run whole for the next call. Only a run longer than the whole
  -- batch (more than `limit` tasks due in one ms at one priority) is moved a batch
  -- at a time.
  local cut = #due == 2 * limit and due[2] ~= due[#due]
  local batch = {}
  for i = 1, #due, 2 do
    if not (cut and due[i + 1] == due[#due]) then
      local sequence = tonumber(redis.call('HGET', order, due[i]) or '0')
      batch[#batch + 1] = {due[i], tonumber(due[i + 1]), sequence}
    end
  end
  table.sort(batch, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[3] < b[3]
  end)
  for _, task in ipairs(batch) do
    redis.call('ZREM', delayed, task[1])
    redis.call('HDEL', order, task[1])
    -- score % 10 is 9 - priority
    redis.call('RPUSH', KEYS[first_ready + task[2] % 10], task[1])
  end
  return #batch
end
