-- paused_page: a fair queue's paused groups, for status, the dashboard and /metrics: how
-- many, and one bounded SSCAN page of their names, each with its ready tasks.
-- KEYS[1] groups_paused (SET)   KEYS[2] groups (ZSET)   KEYS[3] groups_solo (HASH): a
--   paused group still solo there (no fetch has met its token since) has its one task
-- ARGV[1] the SSCAN COUNT (a hint: a small set answers whole, a large one about as many)
-- ARGV[2] the longest group name minitask writes (bytes)
-- Returns {the count (SCARD, less those removed), the names read each followed by its
--   score in groups (false: none, or groups of another type), the lengths of names
--   removed}, or {false, Redis's error} for a set of another type (data minitask did not
--   write: no group is paused by it).
-- A name longer than ARGV[2] (planted: 50 MB, sent whole to every status call, page and
-- scrape) is never sent: it is removed (SREM: lib.lua's bounded_members), its length
-- returned for the caller's log. Invariant: writes nothing else.
local count = redis.pcall('SCARD', KEYS[1])
if type(count) == 'table' and count.err then
  guards().foreign(count)  -- raises any other error (an ACL's, a full Redis's)
  return {false, count.err}
end
local removed = {}
if count == 0 then return {0, {}, removed} end
local page = redis.call('SSCAN', KEYS[1], '0', 'COUNT', ARGV[1])[2]
local found = {}
for _, name in ipairs(bounded_members(KEYS[1], page, 1, tonumber(ARGV[2]), removed, 'SREM')) do
  found[#found + 1] = name
  local score = tolerant(false, 'ZSCORE', KEYS[2], name)
  if not score and tolerant(0, 'HEXISTS', KEYS[3], name) == 1 then score = '1' end
  found[#found + 1] = score
end
return {count - #removed, found, removed}
