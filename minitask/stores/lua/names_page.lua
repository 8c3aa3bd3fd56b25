-- names_page: one SSCAN page of a registry of names (SET: the app's queues or lanes),
-- with only the members no longer than a name can be: a longer one (no minitask wrote
-- it) is removed (SREM: lib.lua's bounded_members), never sent, so that it costs one
-- call, not every listing (4 planted members of 50 MB made each `minitask status` read
-- 1.4 GB; counted here, each still cost Redis 0.2-0.6 s a listing).
-- KEYS[1] the registry (SET)
-- ARGV[1] the SSCAN cursor   ARGV[2] its COUNT
-- ARGV[3] the most bytes of a member minitask writes there
-- Returns: {the next cursor, the members sent, the lengths of the members removed}
-- Invariant: writes nothing else. A key of another type: Redis's refusal (WRONGTYPE),
-- returned.
local reply = redis.pcall('SSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
if type(reply) == 'table' and reply.err then return reply end
local removed = {}
return {reply[1], bounded_members(KEYS[1], reply[2], 1, tonumber(ARGV[3]), removed, 'SREM'),
        removed}
