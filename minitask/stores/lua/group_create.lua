-- group_create: the state of groups awaited as a whole (a chord's header, a group
-- followed by more steps), each created unless it exists: the step that sends a
-- group may run again after a crash, and must not reset a group under way.
-- KEYS[i] state (HASH) of the i-th group
-- ARGV per group three: size (members), packed continuation (what runs once every
--   member succeeded), ttl (ms)
-- Returns: how many were created by this call.
local created = 0
for i = 1, #KEYS do
  local size, follow, ttl = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  if redis.call('EXISTS', KEYS[i]) == 0 then
    redis.call('HSET', KEYS[i], 'size', size, 'next', follow)
    redis.call('PEXPIRE', KEYS[i], ttl)
    created = created + 1
  end
end
return created
