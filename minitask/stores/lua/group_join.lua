-- group_join: record how member ARGV[1] of a group ended, and say what the group's
-- fate now asks of the caller.
-- KEYS[1] state (HASH: size, next, failed_index, failed, fired)
-- KEYS[2] results (HASH: member index -> packed result)
-- ARGV[1] member index   ARGV[2] 'ok' or 'dead'
-- ARGV[3] the packed result, or (dead) the packed failure   ARGV[4] ttl (ms): the
--   group's result_ttl, which its state gets once a member failed it
-- ARGV[5] the most bytes of a value minitask writes in the group (what follows it, a
--   failure, a member's result): a longer one is measured (HSTRLEN) and never read
-- ARGV[6] the open ttl (ms): what an open group's state (and results) gets at each
--   join that leaves it open, as group_create.lua gave it (stores/workflows.py's
--   OPEN_GROUP_TTL, or the result_ttl when longer; absent from an older caller: ARGV[4])
-- ARGV[7] the size of the group the member was sent into (its frame's join carries it:
--   workflow_links.member_join), which the state's size must be; '' or absent (a frame
--   of an older minitask): not checked
-- Returns one of:
--   {'gone'}     no such group (expired, or never created): nothing to do
--   {'waiting'}  members are still running
--   {'fired'}    what follows the group was sent already: nothing to do
--   {'failed'}   another member failed the group: nothing to do
--   {'complete', next, r0, r1, ...}  every member succeeded: the caller runs
--                `next` with the results, in member order, then marks it fired
--   {'corrupt', why, next}  the group's state is not minitask's (another type, a
--                size that is no number, or not the size the member was sent into,
--                or not above its index, a fired mark that is not 1, a failed mark
--                that is no member's index or has no failure, a value longer
--                than ARGV[5]): nothing was
--                written; `next` is what follows the group when it could be read,
--                else empty
--   {'failing', next, failure}  this member failed the group (now, or on an
--                earlier delivery): the caller cancels `next` for `failure`
-- Invariant: a member's first outcome counts, whatever its later deliveries do,
-- and the member that decides the group's fate gets the same answer on every
-- delivery, so a crash before its worker acted on it is made good by the next.
-- Expiry: an open group lives the open ttl from its creation or its last join, however
-- long its members wait in their queues before they run (a group that expired before
-- its members ran answered 'gone', its body cancelled); a failed group keeps its state
-- and results ARGV[4] from then (results first, then the state, then the failure: a
-- refusal part way leaves a group still open, bounded, that the next delivery fails);
-- a complete group gets ARGV[4] once what follows it is sent (workflows.py's _fired).
local state, results = KEYS[1], KEYS[2]
local index = ARGV[1]
if redis.call('EXISTS', state) == 0 then return {'gone'} end
-- what this call reads or writes is checked first (it is not minitask's: the
-- caller dead-letters the member, naming the key): nothing is written then
if not guards().fits(state, 'hash') then
  return {'corrupt', 'key ' .. state .. ' holds another type than the hash minitask keeps there'}
end
local most = tonumber(ARGV[5])
-- what follows the group is measured (HSTRLEN), and read only for a reply that carries
-- it: never when longer than minitask writes (ARGV[5])
local follows = redis.call('HSTRLEN', state, 'next')
if follows > most then
  return {'corrupt', 'key ' .. state .. ' holds no group minitask wrote (what follows it is ' ..
          follows .. ' bytes, longer than minitask writes: not read)'}
end
if not guards().fits(results, 'hash') then
  return {'corrupt', 'key ' .. results .. ' holds another type than the hash minitask keeps ' ..
          'there', follows > 0 and redis.call('HGET', state, 'next') or ''}
end
local fired = redis.call('HGET', state, 'fired')
if fired == '1' then return {'fired'} end
if fired then  -- minitask marks a fired group with 1: whether it fired cannot be told
  return {'corrupt', 'key ' .. state .. ' holds no group minitask wrote (its fired mark ' ..
          'is not 1)', follows > 0 and redis.call('HGET', state, 'next') or ''}
end
local size = guards().whole(redis.call('HGET', state, 'size'), 1, 100000000)
if not size or follows == 0 then
  -- what follows goes back too, when it is there: the caller cancels it, naming the key
  return {'corrupt', 'key ' .. state .. ' holds no group minitask wrote (its size is no ' ..
          'whole number, or what follows the group is missing)',
          follows > 0 and redis.call('HGET', state, 'next') or ''}
end
-- a size planted larger would keep the group open for ever (its body never sent, not a
-- word said), one smaller complete it with results missing: the member says how many
-- it was sent with (ARGV[7]), and its index is below the size in any case
local sent, member = tonumber(ARGV[7] or ''), tonumber(index)
if sent and sent ~= size or not (member and member >= 0 and member < size) then
  local why = sent and sent ~= size and ('was sent into a group of ' .. ARGV[7])
              or 'has no index below it'
  return {'corrupt', 'key ' .. state .. ' holds no group minitask wrote (its size is ' ..
          size .. ', but member ' .. index .. ' ' .. why .. ')', redis.call('HGET', state, 'next')}
end
local ttl = tonumber(ARGV[4])
local failed_index = redis.call('HGET', state, 'failed_index')
if failed_index then
  -- minitask writes a member's index, as the member sends it, with its failure:
  -- any other mark would answer 'failed' to every member, the body never sent
  local failure = redis.call('HSTRLEN', state, 'failed') <= most
                  and redis.call('HGET', state, 'failed')
  local member = failed_index:match('^%d+$') and guards().whole(failed_index, 0, size - 1)
  if not (member and tostring(member) == failed_index and failure) then
    return {'corrupt', 'key ' .. state .. ' holds no group minitask wrote (its failed ' ..
            'member is no member index, or its failure is missing or longer than ' ..
            'minitask writes)', redis.call('HGET', state, 'next')}
  end
  redis.call('PEXPIRE', results, ttl)
  redis.call('PEXPIRE', state, ttl)
  if failed_index == index then return {'failing', redis.call('HGET', state, 'next'), failure} end
  return {'failed'}
end
local open = tonumber(ARGV[6] or '') or ttl
local first = redis.call('HEXISTS', results, index) == 0
if first and ARGV[2] == 'dead' then
  redis.call('PEXPIRE', results, ttl)
  redis.call('PEXPIRE', state, ttl)
  redis.call('HSET', state, 'failed_index', index, 'failed', ARGV[3])
  return {'failing', redis.call('HGET', state, 'next'), ARGV[3]}
end
redis.call('PEXPIRE', state, open)
if first then redis.call('HSET', results, index, ARGV[3]) end
redis.call('PEXPIRE', results, open)
if redis.call('HLEN', results) < size then return {'waiting'} end
local reply = {'complete', redis.call('HGET', state, 'next')}
-- the results are measured whole first (MEMORY USAGE, one command): only when they
-- take more than ARGV[5] (or that cannot be asked) is each measured (HSTRLEN)
local usage = redis.pcall('MEMORY', 'USAGE', results)
local each = not (type(usage) == 'number' and usage <= most)
-- HMGET a thousand fields at a time: unpack() of many more overflows Lua's C stack
for first = 0, size - 1, 1000 do
  local fields = {}
  for i = first, math.min(first + 999, size - 1) do
    fields[#fields + 1] = tostring(i)
    local length = each and redis.call('HSTRLEN', results, fields[#fields]) or 0
    if length > most then  -- planted: the body is never sent such a result
      return {'corrupt', 'key ' .. results .. ' holds a result minitask did not write (member ' ..
              i .. ': ' .. length .. ' bytes, longer than minitask writes: not read)',
              reply[2]}
    end
  end
  local values = redis.call('HMGET', results, unpack(fields))
  for j = 1, #values do
    -- a member not in yet: HLEN counted a field no minitask wrote (an index past size)
    if not values[j] then return {'waiting'} end
    reply[#reply + 1] = values[j]
  end
end
return reply
