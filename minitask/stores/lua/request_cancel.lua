-- request_cancel: ask the worker running a task to stop it (cancel(running=True)).
-- KEYS[1] leases (ZSET)   KEYS[2] cancels (STREAM)
-- KEYS[3] cancels_aside (STREAM): where a stream holding an entry minitask did not
-- write is set aside, under the same hash tag
-- ARGV[1] id ('': post nothing, only set a stream aside as below and say where
-- the stream ends: a worker's cancel watch asks that as it starts, and when it reads
-- such an entry)
-- ARGV[2] entries kept in the stream, about (MAXLEN ~)
-- ARGV[3] the latest time (ms) an id of minitask's entries can hold (message.MAX_MS)
-- ARGV[4] the most bytes (MEMORY USAGE) a stream of minitask's entries takes
-- Returns: 1 when the task is leased (running, or prefetched) and the request
-- was posted, 0 when it is not (finished, queued, scheduled, dead or unknown:
-- the caller cancels those with cancel.lua); 2 when it was posted after the
-- stream was set aside. With ARGV[1] '': {2 when set aside, 1 when not needed, the
-- stream's last generated id ('0-0' when there is no stream: any entry comes after
-- it; for a stream bigger than ARGV[4], which holds entries minitask did not write,
-- the id of a small wake-up entry added to it; false when an ACL refuses XINFO, or
-- Redis that entry), and then the server's time in ms (false: TIME refused too)}. The watch reads from that id: every later entry's id is past it
-- whatever Redis's clock says (a clock stepped back, a failover to a replica whose
-- clock is behind), with nothing written (an entry added there woke every other
-- watch, and failed on a full Redis) and nothing of an entry sent (XINFO's reply
-- holds the first and last entries, a planted one may be 32 MB: they are copied
-- inside Redis, once per watch start, and only the id is returned).
-- Every worker of the queue blocks on the stream (XREAD), so the one holding
-- the lease hears of it at once; others ignore ids they do not hold.
--
-- Data minitask did not write: minitask's entries take their ids from Redis's
-- clock, and no field of an entry is sent or compared here. One
-- past ARGV[3] was planted (an id of 18446744073709551615-18446744073709551615
-- is the last there is: no XADD can follow it, and a watch waiting after it
-- hears nothing), so the stream is renamed to KEYS[3], kept for inspection, and
-- the request starts a new one (the watches, told by the same entry, start over).
-- Refused with nothing changed, naming the key: a stream key of another type, or
-- KEYS[3] held already (a stream set aside earlier that nobody inspected yet).
local id = ARGV[1]
if id ~= '' and not redis.call('ZSCORE', KEYS[1], id) then return 0 end
local g = guards()
-- Only an entry whose id is past ARGV[3] is read (the range starts there): the
-- last entry, whatever its size, is never read whole (a 100 MB field planted
-- there cost Redis 0.5 s at each request).
local past = string.format('%.0f', tonumber(ARGV[3]) + 1) .. '-0'
local planted = g.must('stream', 'XREVRANGE', KEYS[2], '+', past, 'COUNT', 1)[1] ~= nil

local function set_aside()
  if redis.call('EXISTS', KEYS[3]) == 1 then
    error('minitask key ' .. KEYS[2] .. ' holds an entry minitask did not write (an id ' ..
          'past any time minitask writes) and cannot be set aside: ' .. KEYS[3] ..
          ' holds one set aside earlier; inspect that with redis-cli, then delete it; ' ..
          'nothing was changed', 0)
  end
  redis.call('RENAME', KEYS[2], KEYS[3])
end

if planted then set_aside() end
if id == '' then
  local last = '0-0'
  if redis.call('EXISTS', KEYS[2]) == 1 then
    -- XINFO's reply copies the first and last entries inside Redis (a 32 MB one
    -- blocked it ~0.2 s): not for a stream bigger than minitask's ever are
    local size = redis.pcall('MEMORY', 'USAGE', KEYS[2], 'SAMPLES', 0)
    local small = type(size) ~= 'number' or size <= tonumber(ARGV[4])
    local info = small and redis.pcall('XINFO', 'STREAM', KEYS[2]) or {err = 'big'}
    last = false
    if not info.err then
      for i = 1, #info, 2 do
        if info[i] == 'last-generated-id' then last = info[i + 1] end
      end
    elseif not small then
      -- planted entries (no minitask stream is that big): a small entry added tells
      -- where it ends, read by no one (its last entry may be 32 MB, and planted a
      -- moment ago: a start from the clock would send it); refused (a full Redis), the
      -- clock below
      local added = redis.pcall('XADD', KEYS[2], 'NOMKSTREAM', 'MAXLEN', '~',
                                tonumber(ARGV[2]), '*', 'wake', '1')
      if type(added) == 'string' then last = added end
    end
    -- an id past any minitask writes, its entry deleted since (XDEL): nothing can
    -- follow it, and a watch reading from there would hear nothing
    if last and tonumber(string.match(last, '^%d+')) > tonumber(ARGV[3]) then
      set_aside()
      planted, last = true, '0-0'
    end
  end
  local ms = false
  if not last then
    local clock = redis.pcall('TIME')
    if not clock.err then
      ms = string.format('%.0f', tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000))
    end
  end
  return {planted and 2 or 1, last, ms}
end
local reply = redis.pcall('XADD', KEYS[2], 'MAXLEN', '~', tonumber(ARGV[2]), '*', 'id', id)
if type(reply) == 'table' and reply.err then
  -- the last id was taken by an entry deleted since: the stream can take no more
  if planted or not string.find(tostring(reply.err), 'last possible ID', 1, true) then
    error(reply.err, 0)
  end
  set_aside()
  planted = true
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', tonumber(ARGV[2]), '*', 'id', id)
end
return planted and 2 or 1
