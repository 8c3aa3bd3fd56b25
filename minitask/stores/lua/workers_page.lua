-- workers_page: the members of the worker registry (ZSET) a listing reads, each cut to
-- at most ARGV[5] + 1 bytes: a member that long names no worker (a name is at most
-- 300 characters), and is read as too long, never sent whole (4 planted members of
-- 50 MB made each `minitask status`, page and scrape read 200 MB).
-- KEYS[1] workers (ZSET)
-- ARGV[1] the lowest live score   ARGV[2] the highest   ARGV[3] live members at most
-- (-1: all)   ARGV[4] members scored above ARGV[2] at most   ARGV[5] bytes a name has
-- at most
-- Returns: {live members, those that beat last first; members scored above ARGV[2],
--   the nearest first, each followed by its score}
-- Invariant: reads only. The caller has checked the key's type.
local most = tonumber(ARGV[5])
local function cut(members)
  for i, member in ipairs(members) do
    if #member > most then members[i] = string.sub(member, 1, most + 1) end
  end
  return members
end
local live = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[2], ARGV[1], 'LIMIT', 0, ARGV[3])
local ahead = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[2], '+inf', 'WITHSCORES',
                         'LIMIT', 0, ARGV[4])
cut(live)
for i = 1, #ahead, 2 do
  if #ahead[i] > most then ahead[i] = string.sub(ahead[i], 1, most + 1) end
end
return {live, ahead}
