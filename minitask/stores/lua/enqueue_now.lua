-- enqueue_now: one message ready at once whose id may be pending already (a call
-- naming its task_id; adelay()), for a fraction of enqueue.lua's Redis time (five
-- keys where that one takes sixteen, and no library in front). A plain delay() of
-- a new id needs no script at all (QueueStore.push). It writes what enqueue.lua
-- would for that call; when it cannot, it writes nothing and the caller runs
-- enqueue.lua instead.
-- KEYS[1] messages (HASH)   KEYS[2] delayed (ZSET)   KEYS[3] wake (LIST)
-- KEYS[4] the ready list of the message's priority   KEYS[5] its result (LIST)
-- ARGV[1] now (ms)   ARGV[2] wake cap (tokens kept at most)   ARGV[3] id
-- ARGV[4] encoded message
-- Returns: 1 when added, 0 when the id was pending already (left as it is), -1
-- when nothing was written and enqueue.lua is to be called: a delayed task is
-- due (it goes first, and only enqueue.lua is handed every ready list to move
-- it to), or a key holds another type (enqueue.lua refuses the call, naming it,
-- or reads the key as empty where it may).
local due = redis.pcall('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1] .. '9', 'LIMIT', '0', '1')
if due.err or #due > 0 then return -1 end
-- read first: a wake list of another type is enqueue.lua's to move aside
local held = redis.pcall('LLEN', KEYS[3])
if type(held) ~= 'number' then return -1 end
-- pushed first, and taken back unless the message is new (enqueue.lua's order)
if type(redis.pcall('RPUSH', KEYS[4], ARGV[3])) ~= 'number' then return -1 end
local new = redis.pcall('HSETNX', KEYS[1], ARGV[3], ARGV[4])
if new ~= 1 then
  redis.call('LTRIM', KEYS[4], 0, -2)
  if new == 0 then return 0 end
  return -1
end
redis.call('DEL', KEYS[5])
if held < tonumber(ARGV[2]) then redis.call('RPUSH', KEYS[3], '1') end
return 1
