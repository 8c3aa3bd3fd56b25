-- broadcast_lib: what the broadcast scripts share (stores/broadcast.py puts it
-- after lib.lua, in front of each broadcast_*.lua).
-- Every broadcast script takes the same first five keys of a queue:
-- KEYS[1] bcast:state (HASH: seq, the last call sequence handed out; dropped, the
--   last sequence dropped unpulled; maxlen, ttl: the last send's limits)
-- KEYS[2] bcast:log (ZSET id -> seq)
-- KEYS[3] bcast:bodies (HASH)  KEYS[4] bcast:sent (HASH id -> ms)
-- KEYS[5] bcast:cursors (HASH subscriber -> seq)
-- Data minitask did not write (lib.lua): a log, bodies or sent of another type
-- counts as empty where read; a count that is no whole number (nan, inf, 1.5) is
-- read as missing, a cursor as 0 when dropping pulled calls (none is lost).

-- Run `command key id...` over `ids` a thousand at a time: Lua's unpack
-- fails past about 8,000 values, and a send may drop more than that.
local function per_thousand(command, key, ids)
  for first = 1, #ids, 1000 do
    tolerant(0, command, key, unpack(ids, first, math.min(first + 999, #ids)))
  end
end

-- Forget calls of the log: their bodies and send times go with them.
local function forget_calls(ids)
  per_thousand('ZREM', KEYS[2], ids)
  per_thousand('HDEL', KEYS[3], ids)
  per_thousand('HDEL', KEYS[4], ids)
end

-- The lowest cursor of any subscriber, or nil when none subscribes.
local function least_cursor()
  local least
  for _, value in ipairs(tolerant({}, 'HVALS', KEYS[5])) do
    -- nan, inf, 1.5: no cursor of ours, read as 0 (never left out): its subscriber
    -- restarts from the oldest call logged (broadcast_pull.lua), so every call
    -- logged is kept for it, even those every other subscriber pulled
    local cursor = guards().whole(value, 0, MAX_SCORE) or 0
    if least == nil or cursor < least then least = cursor end
  end
  return least
end

-- Delete the calls every subscriber has pulled (all of them when none
-- subscribes), at most `limit` per call: each lane holds its own copy.
local function drop_pulled(limit)
  local least = least_cursor()
  local upto = least and string.format('%.0f', least) or '+inf'
  local ids = tolerant({}, 'ZRANGEBYSCORE', KEYS[2], '-inf', upto, 'LIMIT', 0, limit)
  forget_calls(ids)
end

-- Drop the oldest calls beyond `maxlen`, and those sent before `now - ttl`, at
-- most `limit` per call; the highest sequence dropped goes to state's dropped, so a
-- subscriber behind it learns how many it missed.
local function drop_over(now, maxlen, ttl, limit)
  local over = tonumber(tolerant(0, 'ZCARD', KEYS[2])) - maxlen
  local ids, last, kept = {}, nil, false
  -- Read the calls over maxlen and the next one, then a hundred at a time while
  -- they are past the ttl: a send behind a long log reads about what it drops,
  -- not a whole batch.
  local size = math.max(over, 0) + 1
  while not kept and #ids < limit do
    local from = #ids  -- nothing is removed yet: the next unread call has this rank
    local page = tolerant({}, 'ZRANGE', KEYS[2], from, from + math.min(size, limit - from) - 1,
                          'WITHSCORES')
    if #page == 0 then break end
    for i = 1, #page, 2 do
      local sent = tonumber(tolerant(false, 'HGET', KEYS[4], page[i]))
      if #ids >= over and sent and sent >= now - ttl then
        kept = true
        break
      end
      ids[#ids + 1] = page[i]
      last = tonumber(page[i + 1])
    end
    size = 100
  end
  if last then
    local before = guards().whole(tolerant(false, 'HGET', KEYS[1], 'dropped'), 0, MAX_SCORE) or 0
    if last > before then tolerant(0, 'HSET', KEYS[1], 'dropped', string.format('%.0f', last)) end
  end
  forget_calls(ids)
end
