-- peek: a page of the tasks of a queue's leases (running) or delayed set (scheduled),
-- in score order from a rank, with their messages and delivery counts, read in one
-- step: one round trip per page of at most 1000 tasks (minitask inspect).
-- KEYS[1] leases or delayed (ZSET)   KEYS[2] messages (HASH)   KEYS[3] deliveries (HASH)
-- ARGV[1] how many tasks, at most (1 to 1000: HMGET takes them as arguments)
-- ARGV[2] the most bytes of a message sent (the app's max_message_bytes and room)
-- Returns: {how many the set holds, its first ids and scores (ZRANGE WITHSCORES),
--   their messages, their delivery counts} (a missing one is nil; a message longer
--   than ARGV[2] is its length, never read: 20 planted messages of 10 MB made each
--   listing read 200 MB and block Redis for 1.5 s)
-- ARGV[3] the longest id minitask writes: a longer member is removed, never sent
--   (lib.lua's bounded_members); the lengths of those removed are the fifth element
-- ARGV[4] the rank the page starts at (0: the first task; absent: 0)
-- A delivery count longer than COUNT_MOST (planted: 50 MB, sent to every listing) is
--   measured (HSTRLEN) and never sent: its length, a number, stands in its place (the
--   fetches start a count that is no number afresh at 1, as they would this one).
-- Invariant: reads only, but for the removal of such members.
-- Data minitask did not write (lib.lua): a key of another type is read as empty.
local total = tolerant(0, 'ZCARD', KEYS[1])
local removed = {}
local first = tonumber(ARGV[4] or '0')
local listed = bounded_members(KEYS[1], tolerant({}, 'ZRANGE', KEYS[1], first,
                                                  first + tonumber(ARGV[1]) - 1, 'WITHSCORES'),
                               2, tonumber(ARGV[3]), removed)
if #listed == 0 then return {total, {}, {}, {}, removed} end
local ids = {}
for i = 1, #listed, 2 do ids[#ids + 1] = listed[i] end
-- each message measured (HSTRLEN), then those no longer than ARGV[2] read in one HMGET
local most, bodies, short = tonumber(ARGV[2]), {}, {}
for i, id in ipairs(ids) do
  local length = tolerant(-1, 'HSTRLEN', KEYS[2], id)
  if length < 0 then break end  -- another type: read as empty
  if length > most then bodies[i] = length else short[#short + 1] = i end
end
if #short > 0 then
  local asked = {}
  for n, i in ipairs(short) do asked[n] = ids[i] end
  for n, body in ipairs(redis.call('HMGET', KEYS[2], unpack(asked))) do bodies[short[n]] = body end
end
-- each delivery count measured too, then those no longer than a count read in one HMGET
local COUNT_MOST, counts, asked, at = 64, {}, {}, {}
for i, id in ipairs(ids) do
  local length = tolerant(-1, 'HSTRLEN', KEYS[3], id)
  if length < 0 then return {total, listed, bodies, {}, removed} end  -- another type
  if length > COUNT_MOST then
    counts[i] = length
  else
    at[#asked + 1] = i
    asked[#asked + 1] = id
  end
end
if #asked > 0 then
  for n, count in ipairs(redis.call('HMGET', KEYS[3], unpack(asked))) do counts[at[n]] = count end
end
for i = 1, #ids do if counts[i] == nil then counts[i] = false end end
return {total, listed, bodies, counts, removed}
