-- members_page: a page of a sorted set's members (ZRANGE by rank), none longer than
-- minitask writes there: a longer one (planted: a 50 MB id) is removed, never sent
-- (lib.lua's bounded_members), so that it costs one call, not every listing.
-- KEYS[1] the sorted set   ARGV[1] first rank   ARGV[2] last rank
-- ARGV[3] 'WITHSCORES' or ''   ARGV[4] the longest member minitask writes (bytes)
-- ARGV[5] 'strict': a key of another type is refused (the caller's error names it),
--   else it reads as empty
-- Returns {members (and scores), the lengths of members removed}. Invariant: writes
-- nothing else.
local removed = {}
local listed
if ARGV[3] == 'WITHSCORES' then
  listed = redis.pcall('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'WITHSCORES')
else
  listed = redis.pcall('ZRANGE', KEYS[1], ARGV[1], ARGV[2])
end
if listed.err then
  if ARGV[5] == 'strict' then return redis.error_reply(listed.err) end
  guards().foreign(listed)
  listed = {}
end
return {bounded_members(KEYS[1], listed, ARGV[3] == 'WITHSCORES' and 2 or 1, tonumber(ARGV[4]),
                        removed), removed}
