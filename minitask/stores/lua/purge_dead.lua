-- purge_dead: delete dead letters for good.
-- KEYS[1] dead (ZSET)   KEYS[2] dead_info (HASH)   KEYS[3] messages (HASH)
-- KEYS[4] flow_dead (HASH: the flow specs of dead letters, bury.lua)
-- ARGV: the ids to delete
-- Returns: how many were dead letters and are now gone.
-- Data minitask did not write (lib.lua): a key of another type counts as empty.
local purged = 0
for i = 1, #ARGV do
  if tolerant(0, 'ZREM', KEYS[1], ARGV[i]) == 1 then
    tolerant(0, 'HDEL', KEYS[2], ARGV[i])
    tolerant(0, 'HDEL', KEYS[3], ARGV[i])
    tolerant(0, 'HDEL', KEYS[4], ARGV[i])
    purged = purged + 1
  end
end
return purged
