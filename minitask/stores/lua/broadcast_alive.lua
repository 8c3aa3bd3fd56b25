-- broadcast_alive: a worker of subscriber ARGV[1] is alive (its heartbeat), for one
-- queue: seen at ARGV[2] (ms, the worker's clock, shown to users), and alive on
-- the server's clock (what prunes go by: a worker clock a year ahead must not keep
-- a dead subscriber a year), never set back; alive entries past the server's clock
-- (another's data: inf, 1e300) are aged from now (broadcast_lib.lua's age_ahead).
-- KEYS[1] bcast:seen (HASH)   KEYS[2] bcast:alive (ZSET)
-- Returns the keys Redis refused (data minitask did not write), each with its error.
local refused = {}
local replies = {
  redis.pcall('HSET', KEYS[1], ARGV[1], ARGV[2]),
  redis.pcall('ZADD', KEYS[2], 'GT', string.format('%.0f', server_ms()), ARGV[1]),
}
for i, reply in ipairs(replies) do
  if type(reply) == 'table' and reply.err then
    refused[#refused + 1] = KEYS[i] .. ' (' .. reply.err .. ')'
  end
end
age_ahead(KEYS[2])
return refused
