-- names_page: one SSCAN page of a registry of names (SET), with only the members no
-- longer than a name can be: a longer one (no minitask wrote it) is counted, never
-- sent (4 planted members of 50 MB made each `minitask status` read 1.4 GB).
-- KEYS[1] the registry (SET)
-- ARGV[1] the SSCAN cursor   ARGV[2] its COUNT
-- ARGV[3] the most bytes a member sent may have
-- Returns: {the next cursor, the members sent, how many members were longer}
-- Invariant: reads only. A key of another type: Redis's refusal (WRONGTYPE), returned.
local reply = redis.pcall('SSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
if type(reply) == 'table' and reply.err then return reply end
local most = tonumber(ARGV[3])
local sent, longer = {}, 0
for _, member in ipairs(reply[2]) do
  if #member <= most then sent[#sent + 1] = member else longer = longer + 1 end
end
return {reply[1], sent, longer}
