-- forget: drop an ended task's kept result (and its last progress) early.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] dead (ZSET)     KEYS[5] result (LIST)    KEYS[6] progress (STRING)
-- ARGV[1] id
-- Returns: 1 when a kept result was dropped; 0 when there was none, or when the
-- task has not ended (running, scheduled, retrying or queued), which is left
-- exactly as it was.
-- Invariant: a task that may still run keeps everything; one that has ended
-- loses its result and progress together. A dead task keeps its dead letter
-- (its message stays in messages, for requeue_dead).
-- Data minitask did not write (lib.lua): leases, delayed, messages or dead of
-- another type count as empty.
local id = ARGV[1]
if tolerant(false, 'ZSCORE', KEYS[1], id) or tolerant(false, 'ZSCORE', KEYS[2], id) then
  return 0
end
if not tolerant(false, 'ZSCORE', KEYS[4], id) and tolerant(0, 'HEXISTS', KEYS[3], id) == 1 then
  return 0
end
local had = redis.call('EXISTS', KEYS[5])
redis.call('DEL', KEYS[5], KEYS[6])
return had
