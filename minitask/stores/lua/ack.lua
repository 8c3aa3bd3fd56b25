-- ack: record the final outcome of one or more tasks of a queue and remove
-- every trace of them from the queue.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] order (HASH)
-- KEYS[7] recent (STREAM): the queue's record of recent outcomes (trimmed as written,
--   about: MAXLEN ~, see lib.lua)
-- KEYS[7 + j] result (LIST) of the j-th task that keeps a result (ttl > 0)
-- then, unless every task's fetch found no flow control in the queue (fetch.lua's
-- `flow` answer: none of them has a spec, so flow.lua's finish would find nothing to do):
--   flow (HASH), flow_due (ZSET), the flow prefix (flow.lua), wake (LIST); or flow
--   alone when no task's lease holds a slot (fetch.lua's `flow` answer 2): the
--   tasks' specs are dropped unread
-- ARGV[1] the record's length (entries shown; Redis keeps up to a stream node more)
-- then per task four: id, encoded outcome, result ttl (ms; 0: keep no result,
--   and no result key is passed: nothing is written, so none is deleted), the
--   task's entry in the record ('': none, the record is off)
-- Returns: per task, 1 when the caller still held the lease, 0 when it had lost
-- it (the task was re-delivered meanwhile; the outcome is recorded all the
-- same, and a ready-list entry left behind is skipped by fetch, its message
-- being gone).
-- Invariant: a message leaves Redis in the same step that records its outcome.
-- A call Redis refuses part way (an ACL changed while a worker runs: NOPERM) keeps
-- the writes made before it (no rollback), so the lease, which makes a task be
-- delivered again, is removed last, after every other write: a refusal leaves it,
-- and the task comes back when it expires (at least once), never lost. (Written
-- first, a refused RPUSH left a message with no lease and no result: lost.)
-- Data minitask did not write (lib.lua): an ack never fails on it. A key of
-- another type among the first seven, or in the flow control's keys it writes, is
-- moved aside (lib.lua's aside(): to `key`:foreign) and counts as empty (its leases
-- as lost); a result key is replaced whole. On this hot path, redis.pcall and
-- lib.lua's guards() only for an error.
-- held, ids: made at their size for one task (a table's growth is a rehash in Redis);
-- lost: made for a lost lease only
local held, ids, lost = {nil}, {nil}, nil
local results = 7
for i = 2, #ARGV, 4 do
  ids[#ids + 1] = ARGV[i]
  if ARGV[i + 2] ~= '0' then  -- a ttl: read as text, as tonumber() costs Redis a strtod
    results = results + 1
    -- replaced whole: pushed, and what an earlier ack left trimmed (a lost lease's second
    -- outcome, or a refused ack's first try), or a key of another type deleted first
    local length = redis.pcall('RPUSH', KEYS[results], ARGV[i + 1])
    if type(length) == 'table' then
      guards().foreign(length)
      redis.call('DEL', KEYS[results])
      redis.call('RPUSH', KEYS[results], ARGV[i + 1])
    elseif length > 1 then
      redis.call('LTRIM', KEYS[results], -1, -1)
    end
    redis.call('PEXPIRE', KEYS[results], ARGV[i + 2])  -- as text: Redis formats no number
  end
  if ARGV[i + 3] ~= '' then  -- as lib.lua's function does, inline: no closure per call
    local added = redis.pcall('XADD', KEYS[7], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[i + 3],
                              'n', ARGV[1])
    if type(added) == 'table' then guards().rerecord(added, KEYS[7], ARGV[1], ARGV[i + 3]) end
  end
end
-- flow control: max_running slots freed, specs dropped (one HMGET when none has one).
-- Before the leases: a refusal after it leaves the lease, whose expiry frees the slots
-- again (fetch.lua's reclaim; freeing is idempotent)
if #KEYS == results + 1 then
  local removed = redis.pcall('HDEL', KEYS[results + 1], unpack(ids))
  if type(removed) == 'table' then guards().displaced(removed, KEYS[results + 1], 'hash') end
elseif #KEYS > results then
  flow_control().finish(KEYS[results + 1], KEYS[results + 3], KEYS[results + 2],
                        KEYS[results + 4], ids, true)
end
-- one call per key for the whole batch (batches are capped at MAX_PREFETCH ids); a
-- lease left by a refusal after this is reclaimed to a ready list, whose entry fetch
-- drops, its message being gone: the outcome is recorded
for key = 5, 3, -1 do
  local removed = redis.pcall('HDEL', KEYS[key], unpack(ids))
  if type(removed) == 'table' then guards().displaced(removed, KEYS[key], 'hash') end
end
-- the leases, last
for i = 1, #ids do
  local removed = redis.pcall('ZREM', KEYS[1], ids[i])
  if type(removed) == 'table' then guards().displaced(removed, KEYS[1], 'zset') removed = 0 end
  held[i] = removed
  if removed == 0 then
    lost = lost or {}
    lost[#lost + 1] = ids[i]
  end
end
-- a task whose lease was held was in leases only (fetch.lua's invariant): not in
-- delayed, and promotion dropped its order entry. Only a lost lease (re-delivered,
-- and maybe retried into delayed meanwhile) is looked for there; a refusal here
-- leaves a delayed entry with no message, promoted, then dropped by a fetch.
if lost then
  local removed = redis.pcall('ZREM', KEYS[2], unpack(lost))
  if type(removed) == 'table' then guards().displaced(removed, KEYS[2], 'zset') removed = 0 end
  if removed > 0 then
    -- delayed ids keep their sequence in order
    local dropped = redis.pcall('HDEL', KEYS[6], unpack(lost))
    if type(dropped) == 'table' then guards().displaced(dropped, KEYS[6], 'hash') end
  end
end
return held
