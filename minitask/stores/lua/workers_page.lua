-- workers_page: the members of the worker registry (ZSET) a listing reads, none longer
-- than a worker's id can be (ARGV[5] bytes: a name is at most 300 characters): a longer
-- member (no minitask wrote it) is removed (ZREM: lib.lua's bounded_members), never
-- sent, so that it costs one call, not every listing (4 planted members of 50 MB made
-- each `minitask status`, page and scrape read 200 MB; cut, each still cost Redis 0.2 s).
-- KEYS[1] workers (ZSET)
-- ARGV[1] the lowest live score   ARGV[2] the highest   ARGV[3] live members at most
-- (-1: all)   ARGV[4] members scored above ARGV[2] at most   ARGV[5] bytes a name has
-- at most
-- Returns: {live members, those that beat last first; members scored above ARGV[2],
--   the nearest first, each followed by its score; the lengths of the live members
--   removed; the lengths of those above ARGV[2] removed}
-- Invariant: writes nothing else. The caller has checked the key's type.
local most = tonumber(ARGV[5])
local removed_live, removed_ahead = {}, {}
local live = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[2], ARGV[1], 'LIMIT', 0, ARGV[3])
local ahead = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[2], '+inf', 'WITHSCORES',
                         'LIMIT', 0, ARGV[4])
return {bounded_members(KEYS[1], live, 1, most, removed_live),
        bounded_members(KEYS[1], ahead, 2, most, removed_ahead), removed_live, removed_ahead}
