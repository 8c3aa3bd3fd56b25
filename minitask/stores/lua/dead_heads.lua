-- dead_heads: the oldest dead letters of a queue, each with its length and the
-- first bytes of its message and of its dead-letter record, read in one step: what
-- a listing's row needs (minitask dead list, the dashboard's dead letters), never a
-- whole letter (1,500 letters of 500 kB made a 1 GB listing).
-- KEYS[1] dead (ZSET)   KEYS[2] messages (HASH)   KEYS[3] dead_info (HASH)
-- ARGV[1] how many letters, at most   ARGV[2] bytes of each value returned, at most
-- Returns: {ids and scores (ZRANGE WITHSCORES), heads of their messages, lengths of
--   their messages, heads of their records, lengths of their records}; a value
--   that is missing is '' of length -1.
-- Invariant: reads only.
-- Data minitask did not write (lib.lua): a dead set of another type is read as
-- empty; a messages or dead_info key of another type gives each value '' of length
-- -2, so that a listing says the record cannot be read, not that there is none.
local listed = tolerant({}, 'ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local most = tonumber(ARGV[2])
local heads = {{}, {}, {}, {}}
for i = 1, #listed, 2 do
  for which, key in ipairs({KEYS[2], KEYS[3]}) do
    local value = tolerant(-2, 'HGET', key, listed[i])
    local n = #heads[2 * which - 1] + 1
    if type(value) == 'string' then
      heads[2 * which - 1][n] = string.sub(value, 1, most)
      heads[2 * which][n] = #value
    else
      heads[2 * which - 1][n] = ''
      heads[2 * which][n] = value or -1
    end
  end
end
return {listed, heads[1], heads[2], heads[3], heads[4]}
