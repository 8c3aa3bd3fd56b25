-- message_piece: a piece of a task's message, for a reader that must not ask for a
-- large one in one reply: Redis closes the connection of a reply over its
-- client-output-buffer-limit, and a poisoned task of a 3 MB message, its burial
-- reading it whole, was never buried (probe35 M1). Redis copies the value at each
-- call: its reader reads a bounded number of pieces (bounds.message_in_pieces).
-- KEYS[1] the queue's messages hash   ARGV[1] the task id
-- ARGV[2] the piece's first byte (0 first)   ARGV[3] the most bytes sent
-- Returns: {the message's length, the piece}; {0} when there is no such field;
--   {-1} when the key holds another type.
-- Invariant: reads only.
local length = redis.pcall('HSTRLEN', KEYS[1], ARGV[1])
if type(length) == 'table' and length.err then
  guards().foreign(length)  -- raises any other error
  return {-1}
end
if length == 0 then return {0} end
local first = tonumber(ARGV[2])
return {length, string.sub(redis.call('HGET', KEYS[1], ARGV[1]), first + 1,
                           first + tonumber(ARGV[3]))}
