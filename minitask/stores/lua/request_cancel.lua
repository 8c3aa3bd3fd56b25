-- request_cancel: ask the worker running a task to stop it (cancel(running=True)).
-- KEYS[1] leases (ZSET)   KEYS[2] cancels (STREAM)
-- ARGV[1] id   ARGV[2] entries kept in the stream, about (MAXLEN ~)
-- Returns: 1 when the task is leased (running, or prefetched) and the request
-- was posted, 0 when it is not (finished, queued, scheduled, dead or unknown:
-- the caller cancels those with cancel.lua).
-- Every worker of the queue blocks on the stream (XREAD), so the one holding
-- the lease hears of it at once; others ignore ids they do not hold.
local id = ARGV[1]
if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', tonumber(ARGV[2]), '*', 'id', id)
return 1
