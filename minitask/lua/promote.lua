-- promote: move due delayed tasks to the tail of their ready lists, in the order in
-- which they fell due (equal due times: the order in which they were scheduled).
-- Run before every step that appends to a ready list (enqueue, revive, fetch), so a
-- task that fell due earlier is never queued behind one added after that.
-- KEYS[1] delayed (ZSET)   KEYS[2] order (HASH)
-- KEYS[3..12] ready lists, priority 9 first (KEYS[12 - p] holds priority p)
-- ARGV[1] now (ms)   ARGV[2] batch limit (tasks moved at most)
-- Returns: how many tasks were promoted.
-- Invariant: a promoted id leaves delayed and order in the step that queues it.
local limit = tonumber(ARGV[2])
local horizon = string.format('%.0f', tonumber(ARGV[1]) * 10 + 9)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', horizon, 'WITHSCORES', 'LIMIT', 0, limit)
if #due == 0 then return 0 end
-- A full batch may cut the last run of equal scores, whose members the ZSET orders by
-- id: leave that run whole for the next call. Only a run longer than the whole batch
-- (more than `limit` tasks due in one ms at one priority) is moved a batch at a time.
local cut = #due == 2 * limit and due[2] ~= due[#due]
local batch = {}
for i = 1, #due, 2 do
  if not (cut and due[i + 1] == due[#due]) then
    local sequence = tonumber(redis.call('HGET', KEYS[2], due[i]) or '0')
    batch[#batch + 1] = {due[i], tonumber(due[i + 1]), sequence}
  end
end
table.sort(batch, function(a, b)
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[3] < b[3]
end)
for _, task in ipairs(batch) do
  redis.call('ZREM', KEYS[1], task[1])
  redis.call('HDEL', KEYS[2], task[1])
  -- score % 10 is 9 - priority, so the list is KEYS[12 - priority]
  redis.call('RPUSH', KEYS[3 + task[2] % 10], task[1])
end
return #batch
