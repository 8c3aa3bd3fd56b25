-- state: where a task is now, read in one consistent step.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] retrying (HASH)
-- KEYS[4] dead (ZSET)     KEYS[5] messages (HASH)  KEYS[6] result (LIST)
-- ARGV[1] id   ARGV[2] the most bytes of an outcome sent (the app's limits and room)
-- Returns: {state, encoded outcome or false}; state is one of running,
-- scheduled, retrying, dead, queued, finished, unknown; or {'unreadable', key,
-- the type it holds, the type minitask keeps there}; or {'too large', key, its
-- length}: a result longer than ARGV[2] (no minitask wrote it) is measured and never
-- read (a planted 20 MB result was read whole by every status()); a retry note that
-- long is not read either (retrying, with no note).
-- Data minitask did not write (lib.lua): a key of another type holds none of
-- minitask's tasks (a script that would add one refuses), so the task is looked for
-- in the others. The queue's keys are every task's: one of them broken says nothing
-- of this id (an id never sent stays 'unknown', and another queue may know it). The
-- task's own result key of another type is its record made unreadable: when no
-- other key has the task, the answer is 'unreadable', naming it, never "unknown"
-- (never enqueued, as a tolerant read would say). Reads only.
local id = ARGV[1]
local most = tonumber(ARGV[2])
local odd = false  -- the task's own result key holds another type

-- redis.pcall on KEYS[i]: its reply, or false for a key of another type.
local function read(i, command, ...)
  local reply = redis.pcall(command, KEYS[i], ...)
  if type(reply) == 'table' and reply.err then
    guards().foreign(reply)  -- raises any other error
    odd = odd or i == 6
    return false
  end
  return reply
end

if read(1, 'ZSCORE', id) then return {'running', false} end
if read(2, 'ZSCORE', id) then
  -- a note longer than minitask writes is not read: the task is retrying all the same
  local length = read(3, 'HSTRLEN', id) or 0
  if length > most then return {'retrying', false} end
  local note = length > 0 and read(3, 'HGET', id)
  if note then return {'retrying', note} end
  return {'scheduled', false}
end
if read(4, 'ZSCORE', id) then return {'dead', false} end
-- pending, not delayed, not leased, not dead: it sits in a ready list
if read(5, 'HEXISTS', id) == 1 then return {'queued', false} end
-- a list holds no length of its elements: MEMORY USAGE measures it (O(1) for the one
-- element minitask writes); an ACL without it (the docs' list before it) reads as before.
-- It counts the allocator's block, rounded up to a size class (a quarter more at
-- most) and the list's own overhead: past a quarter and 4 kB more than `most` the
-- element is longer than minitask writes, unread; between, it is read here and its
-- own length decides (a result of max_result_bytes measured 1.25 times that).
local size = redis.pcall('MEMORY', 'USAGE', KEYS[6])
if type(size) == 'number' and size > most * 1.25 + 4096 then
  return {'too large', KEYS[6], size, 'memory'}  -- (memory use, not the value's length)
end
local outcome = read(6, 'LINDEX', 0)
if outcome and type(size) == 'number' and size > most and #outcome > most then
  return {'too large', KEYS[6], #outcome}
end
if outcome then return {'finished', outcome} end
if not odd then return {'unknown', false} end
local held = redis.call('TYPE', KEYS[6])
if type(held) == 'table' then held = held.ok end
return {'unreadable', KEYS[6], tostring(held), 'list'}
