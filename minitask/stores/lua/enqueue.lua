-- enqueue: store messages and make them ready now or due later, atomically.
-- Runs after promote.lua (prepended by stores/scripts.py): due delayed tasks go first.
-- KEYS[1] messages (HASH)   KEYS[2] delayed (ZSET)   KEYS[3] wake (LIST)
-- KEYS[4..13] ready lists, priority 9 first (KEYS[13 - p] holds priority p)
-- KEYS[14] order (HASH)   KEYS[15] sequence (STRING)
-- KEYS[15 + n] result (LIST) of the n-th message
-- ARGV[1] now (ms)   ARGV[2] wake cap (tokens kept at most)   ARGV[3] promotion limit
-- then per message, four ARGVs: id, encoded message, priority (0..9), due (ms; <= now: ready)
-- Returns: the number of messages added (an id already pending is left as it is).
-- Invariant: every id in a ready list or in delayed has its message in messages,
-- unless it was cancelled or refused part way (fetch skips the stale entry); a
-- result left by an earlier run of the same id is gone once the id is pending again.
-- A refusal part way (an ACL changed while a client sends: Redis refuses a command
-- when the script comes to it and keeps the writes before): a call sent again with the
-- same ids queues each message it had not finished once. A message due later is
-- scheduled (its sequence, ZADD, order, its result's DEL) before its message, the write
-- that makes its id pending, read first (HEXISTS): refused part way, it is at most an
-- id in delayed with no message (dropped when due; ZADD rewrites it). The message
-- written first, a refused DEL or ZADD left it stored in no queue, and the call sent
-- again found it pending: the task never ran (issue 29). A message ready at once is
-- pushed before it is written (an entry with no message is dropped by a fetch, as
-- is a second one of an id held already); a DEL refused after it leaves the task
-- queued, with its earlier run's result until it ends (a DEL first would have to read
-- first too: a 9% dearer delay_many()). A promotion refused part way leaves a due
-- task in its ready list and still in delayed: a fetch drops the first (its id is
-- delayed) and the task is promoted again. Refused at the wake tokens, every message
-- is written: workers find them when they next poll.
-- Data minitask did not write (lib.lua): messages, a ready list a message goes to or
-- delayed holding another type refuses the call before any write (a ready list a
-- promoted task goes to is moved aside: promote.lua). Without a promotion, the first
-- message's own writes come first and fail with nothing changed (its push is taken
-- back); every other key is checked before them. A sequence that is no number
-- starts afresh; an order hash of another type is left as it is (no sequence kept);
-- a wake list of another type is moved aside (lib.lua's aside), then gets the tokens.
local now = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local batch, delayed_ok = due_batch(KEYS[2], KEYS[14], 4, now, tonumber(ARGV[3]))
local first_ready  -- the ready list the first message goes to, if it goes to one
for i = 4, #ARGV, 4 do
  local ready = KEYS[13 - tonumber(ARGV[i + 2])]
  if tonumber(ARGV[i + 3]) > now then
    if not delayed_ok then guards().expect(KEYS[2], 'zset') end  -- refuses
  elseif i == 4 and not batch then
    first_ready = ready
  elseif ready ~= first_ready then
    guards().expect(ready, 'list')
  end
end
if batch then guards().expect(KEYS[1], 'hash') end
promote(KEYS[2], KEYS[14], batch)
local added, wake = 0, 0
for i = 4, #ARGV, 4 do
  local id, body = ARGV[i], ARGV[i + 1]
  local priority, due = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  -- redis.pcall, and on an error must() again to refuse (lib.lua: the hot path)
  if due <= now then
    -- pushed first, and taken back unless the message is new: no extra call to
    -- check the ready list (a wrong type refuses this first write)
    local ready = KEYS[13 - priority]
    local pushed = redis.pcall('RPUSH', ready, id)
    if type(pushed) == 'table' then guards().must('list', 'RPUSH', ready, id) end
    local new = redis.pcall('HSETNX', KEYS[1], id, body)
    if new ~= 1 then redis.call('LTRIM', ready, 0, -2) end
    if type(new) == 'table' then guards().must('hash', 'HSETNX', KEYS[1], id, body) end
    if new == 1 then
      added = added + 1
      wake = wake + 1
      redis.call('DEL', KEYS[15 + i / 4])  -- (refused: the task is queued all the same)
    end
  else
    -- an id pending already is left as it is: read first, so that its message, which
    -- makes it pending, is written after every write that schedules it
    local held = redis.pcall('HEXISTS', KEYS[1], id)
    if held ~= 0 and held ~= 1 then guards().must('hash', 'HEXISTS', KEYS[1], id) end
    if held == 0 then
      -- the scheduling sequence: lib.lua's bump() only when the INCR fails (a sequence
      -- that is no number, a key of another type); taken before the ZADD, which a
      -- call sent again rewrites (no second entry)
      local sequence = redis.pcall('INCR', KEYS[15])
      if type(sequence) == 'table' then sequence = guards().bump(KEYS[15]) end
      redis.call('ZADD', KEYS[2], string.format('%.0f', due * 10 + 9 - priority), id)
      tolerant(0, 'HSET', KEYS[14], id, sequence)
      -- wake sleepers only when this task is due before everything else delayed
      if redis.call('ZRANGE', KEYS[2], 0, 0)[1] == id then wake = wake + 1 end
      redis.call('DEL', KEYS[15 + i / 4])
      redis.call('HSET', KEYS[1], id, body)  -- its message last: pending from here
      added = added + 1
    end
  end
end
if wake > 0 then
  -- read the length first: when the tokens are at their cap (no worker has taken
  -- one since), nothing is written, rather than a push trimmed again at once
  local held = redis.pcall('LLEN', KEYS[3])
  -- a wake list of another type is moved aside (one WARNING in Redis's log, naming
  -- it): the tokens then wake the workers blocked on it at once
  if type(held) == 'table' then guards().displaced(held, KEYS[3], 'list') held = 0 end
  if wake > cap - held then wake = cap - held end
  if wake > 0 then
    local tokens = {}
    for i = 1, wake do tokens[i] = '1' end
    redis.call('RPUSH', KEYS[3], unpack(tokens))
  end
end
return added
