-- ack_fetch: the drain loop's round trip (the outcomes of tasks of a queue, then
-- the next fetch from it) as one script call: one call's fixed price, and the keys
-- both use passed once. stores/scripts.py puts ack.lua in front as the function
-- ack_base(KEYS, ARGV), fetch.lua as fetch_base(), so this adds to both and copies
-- neither; each runs as it does alone, the ack first.
-- KEYS: fetch.lua's 23, then retrying (HASH), recent (STREAM), then the result keys
--   ack.lua is passed
-- ARGV: fetch.lua's 7, then '1' when ack.lua is passed the flow keys, '2' the flow
--   hash alone (else '0'),
--   then ack.lua's (the record's length, then four per task)
-- Returns: fetch.lua's reply, with ack.lua's held flags after it as one element, a
--   string of digits (1: held); when the fetch raised (the acks written), its error
--   (a nested error reply) and the flags.
-- tables made at their size where it is known (one task, with a result key or not):
-- each growth of a table is a rehash
local ack_keys = {KEYS[2], KEYS[1], KEYS[3], KEYS[4], KEYS[24], KEYS[18], KEYS[25],
                  KEYS[26]}
for i = 27, #KEYS do ack_keys[#ack_keys + 1] = KEYS[i] end
if ARGV[8] == '1' then
  -- ack.lua's order: flow, flow_due, the flow prefix, wake
  ack_keys[#ack_keys + 1] = KEYS[19]
  ack_keys[#ack_keys + 1] = KEYS[20]
  ack_keys[#ack_keys + 1] = KEYS[21]
  ack_keys[#ack_keys + 1] = KEYS[5]
elseif ARGV[8] == '2' then
  ack_keys[#ack_keys + 1] = KEYS[19]
end
local ack_argv = {ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13]}
for i = 14, #ARGV do ack_argv[#ack_argv + 1] = ARGV[i] end
local held = ack_base(ack_keys, ack_argv)
local flags = ''  -- as text: a number would be formatted with snprintf
for i = 1, #held do flags = flags .. (held[i] == 1 and '1' or '0') end
-- the acks are written: a fetch Redis refuses (its queue's data) must not undo them
-- in the caller's eyes, who would record them again; its error comes in its place
local ok, reply = pcall(fetch_base)
if not ok then
  if type(reply) == 'table' then reply = reply.err end
  return {redis.error_reply(tostring(reply)), flags}
end
reply[#reply + 1] = flags
return reply
