-- spawn: send workflow steps to a queue, each at most once. A step whose marker
-- exists was sent before (by a duplicate of this call: the step before it was
-- delivered again after a crash) or cancelled (an earlier step ended dead), and
-- is left alone. Runs after promote.lua (put in front by stores/workflows.py).
-- KEYS[1] messages (HASH)   KEYS[2] delayed (ZSET)   KEYS[3] wake (LIST)
-- KEYS[4..13] ready lists, priority 9 first (KEYS[13 - p] holds priority p)
-- KEYS[14] order (HASH)   KEYS[15] sequence (STRING)
-- KEYS[14 + 2n] result (LIST) and KEYS[15 + 2n] marker (HASH: state) of the n-th step
-- KEYS[16 + 2N], only when ARGV[4] > 0: a handle record (STRING, keys.py: handle:<id>)
-- KEYS[#KEYS], only when ARGV[6] is not empty: a plan record (STRING: workflow:<id>)
-- ARGV[1] now (ms)   ARGV[2] wake cap (tokens kept at most)   ARGV[3] promotion limit
-- ARGV[4] the handle record's ttl (ms; 0: no record)   ARGV[5] the record (packed)
-- ARGV[6] the plan record (packed; '': none), written with the handle record, its ttl
-- ARGV[7] the id of the steps' workflow ('': none), kept in each marker's field w
-- then per step five ARGVs: id, encoded message, priority (0..9),
--   due (ms; <= now: ready), marker ttl (ms: the workflow's longest result ttl, its handle
--   record's, when longer than the step's: workflow_links.marker_ttl)
-- Returns: how many steps were sent by this call; when a step's marker was there (the
--   step not sent), {that count, the id of each such step...} (stores/workflow_checks.py
--   looks whether those were lost, and only those: one sent now may already be done)
-- Invariant: a step is sent at most once while its marker lives (as long as its
-- result would, and its workflow's handle record), however often the steps before
-- it run. A handle record (and a plan record) is written in the call that sends the
-- steps, before them.
-- A refusal part way (an ACL changed while a worker runs: Redis refuses a command
-- when the script comes to it and keeps the writes before): a step's marker says
-- "sent" last, after its push and its message, and every command after its push
-- (HSET, PEXPIRE) has run in that step before it, so none is refused there. A call
-- refused part way leaves the step it was at unsent (its marker without a state, as
-- a reservation; at most its id in delayed, which ZADD rewrites), and the call run
-- again sends it once: a marker written first had the retry skip a step never
-- queued, and the workflow stopped (issue 29).
-- Data minitask did not write (lib.lua): a marker that is no step marker, messages,
-- delayed (a step due later) or a ready list a step goes to of another type refuses
-- the call before any write, naming the key and its type: a call refused half-way
-- left markers written, so a retry never sent those steps. A ready list only a
-- promoted task goes to is moved aside (promote.lua); a sequence that is no number
-- starts afresh; an order hash or a wake list of another type is left as it is (no
-- sequence kept, no token pushed), as enqueue.lua does.
local now = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
-- marked[n]: the n-th step's marker holds a state (sent, cancelled), made only when
-- one does (a table costs Redis about 1,200 instructions)
local marked
for n = 1, (#ARGV - 7) / 5 do
  if step_marker(KEYS[15 + 2 * n]) then
    marked = marked or {}
    marked[n] = true
  end
end
-- each key once a call, and guards() made only to refuse (lib.lua's unless_other)
local checked = {[KEYS[1]] = unless_other(KEYS[1], 'hash')}
for i = 11, #ARGV, 5 do
  local key = KEYS[2]
  if tonumber(ARGV[i]) <= now then key = KEYS[13 - tonumber(ARGV[i - 1])] end
  if not checked[key] then checked[key] = unless_other(key, key == KEYS[2] and 'zset' or 'list') end
end
-- the first write (due_batch removes an entry no task of ours: promote.lua)
promote_due(KEYS[2], KEYS[14], 4, now, tonumber(ARGV[3]))
-- the handle and plan records before the steps: a call refused part way (an ACL
-- changed while a worker runs) never leaves steps sent whose workflow's handle cannot
-- be rebuilt in another process (a SET refused after them did); refused at a step, the
-- call sent again writes them again, with the steps it had not sent
if tonumber(ARGV[4]) > 0 then
  redis.call('SET', KEYS[16 + 2 * ((#ARGV - 7) / 5)], ARGV[5], 'PX', ARGV[4])
  if ARGV[6] ~= '' then redis.call('SET', KEYS[#KEYS], ARGV[6], 'PX', ARGV[4]) end
end
local added, wake = 0, 0
local skipped  -- ids of the steps whose marker was there: none mostly, so no table
local workflow = ARGV[7]
for i = 8, #ARGV, 5 do
  local n = (i - 8) / 5 + 1
  local id, body = ARGV[i], ARGV[i + 1]
  local priority, due = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local marker = KEYS[15 + 2 * n]
  -- HSET and PEXPIRE rather than SET NX PX: no command beyond the docs' ACL list (guide/scaling.rst)
  if marked and marked[n] then
    skipped = skipped or {0}
    skipped[#skipped + 1] = id
  elseif redis.call('HEXISTS', KEYS[1], id) == 1 then
    -- its id holds a task already: marked sent, nothing sent (the marker expired
    -- while the step waited, or a task of the same id)
    if workflow ~= '' then
      redis.call('HSET', marker, 'state', 'sent', 'w', workflow)
    else
      redis.call('HSET', marker, 'state', 'sent')
    end
    redis.call('PEXPIRE', marker, ARGV[i + 4])
  else
    -- the marker's commands first, with no state (unsent, as a reservation is): each
    -- command after the push below has run in this step, and no refusal comes there
    redis.call('HSET', marker, 'w', workflow)
    redis.call('PEXPIRE', marker, ARGV[i + 4])
    redis.call('DEL', KEYS[14 + 2 * n])
    added = added + 1
    if due > now then
      -- the scheduling sequence, as enqueue.lua takes it: one that is no count (text,
      -- past 2^63: data minitask did not write) starts afresh (lib.lua's bump);
      -- taken before the ZADD, which a call run again rewrites (no second entry)
      local sequence = redis.pcall('INCR', KEYS[15])
      if type(sequence) == 'table' then sequence = guards().bump(KEYS[15]) end
      redis.call('ZADD', KEYS[2], string.format('%.0f', due * 10 + 9 - priority), id)
      tolerant(0, 'HSET', KEYS[14], id, sequence)
      if redis.call('ZRANGE', KEYS[2], 0, 0)[1] == id then wake = wake + 1 end
    else
      redis.call('RPUSH', KEYS[13 - priority], id)
      wake = wake + 1
    end
    -- its message after its push (an id without one is dropped by a fetch), and
    -- "sent" last
    redis.call('HSET', KEYS[1], id, body)
    redis.call('HSET', marker, 'state', 'sent')
    -- a step of no workflow keeps no w ('' above made the marker, before its push)
    if workflow == '' then redis.call('HDEL', marker, 'w') end
  end
end
if wake > 0 then
  if wake > cap then wake = cap end
  local tokens = {}
  for i = 1, wake do tokens[i] = '1' end
  -- a wake list of another type: no token (workers poll it); nor when Redis refuses
  -- the push or its trim (lib.lua's refused: an ACL changed while a worker runs):
  -- the steps are sent, and spawn_group.lua creates its groups after this
  local held = redis.pcall('RPUSH', KEYS[3], unpack(tokens))
  if type(held) == 'table' then
    if not guards().refused(held) then guards().foreign(held) end
  elseif held > cap then
    redis.pcall('LTRIM', KEYS[3], 0, cap - 1)
  end
end
if skipped then
  skipped[1] = added
  return skipped
end
return added
