-- dead_heads: the oldest dead letters of a queue, each with its length and the
-- first bytes of its message and of its dead-letter record, read in one step: what
-- a listing's row needs (minitask dead list, the dashboard's dead letters), never a
-- whole letter (1,500 letters of 500 kB made a 1 GB listing).
-- KEYS[1] dead (ZSET)   KEYS[2] messages (HASH)   KEYS[3] dead_info (HASH)
-- ARGV[1] how many letters, at most   ARGV[2] bytes of each value returned, at most
-- ARGV[3], ARGV[4] the most bytes of a message, of a record, minitask writes
-- Returns: {ids and scores (ZRANGE WITHSCORES), heads of their messages, lengths of
--   their messages, heads of their records, lengths of their records}; a value
--   that is missing is '' of length -1; one longer than minitask writes (ARGV[3],
--   ARGV[4]) is measured (HSTRLEN) and never read: false, of its length (20 planted
--   values of 10 MB, read whole to be cut, took Redis 1.2 s a listing).
-- ARGV[5] the longest id minitask writes: a longer member is removed, never sent
--   (lib.lua's bounded_members); the lengths of those removed are the sixth element
-- Invariant: reads only, but for the removal of such members.
-- Data minitask did not write (lib.lua): a dead set of another type is read as
-- empty; a messages or dead_info key of another type gives each value '' of length
-- -2, so that a listing says the record cannot be read, not that there is none.
local removed = {}
local listed = bounded_members(KEYS[1], tolerant({}, 'ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1,
                                                  'WITHSCORES'), 2, tonumber(ARGV[5]), removed)
local most = tonumber(ARGV[2])
local longest = {tonumber(ARGV[3]), tonumber(ARGV[4])}
local heads = {{}, {}, {}, {}}
for i = 1, #listed, 2 do
  for which, key in ipairs({KEYS[2], KEYS[3]}) do
    local length = tolerant(-2, 'HSTRLEN', key, listed[i])
    local value = ''
    if length > longest[which] then
      value = false
    elseif length > 0 then
      value = string.sub(redis.call('HGET', key, listed[i]), 1, most)
    elseif length == 0 and redis.call('HEXISTS', key, listed[i]) == 0 then
      length = -1
    end
    local n = #heads[2 * which - 1] + 1
    heads[2 * which - 1][n] = value
    heads[2 * which][n] = length
  end
end
return {listed, heads[1], heads[2], heads[3], heads[4], removed}
