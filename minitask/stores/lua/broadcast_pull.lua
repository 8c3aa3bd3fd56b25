-- broadcast_pull: move a subscriber's next calls from the broadcast log into its
-- lane (a queue of its own, served by fetch.lua), advancing its cursor; then
-- delete the calls every subscriber has pulled. Count 0 only re-arms the wake.
-- On the worker's clock it first drops what is over the last send's
-- broadcast_maxlen / broadcast_ttl (state's maxlen and ttl), as a send does.
-- KEYS[1..9] as broadcast_lib.lua
-- KEYS[10] the lane's messages (HASH)   KEYS[11] the lane's priority 9 ready list
-- KEYS[12] the lane's wake list   KEYS[13..] the wake lists of the lanes of the
--   subscribers in ARGV[7..], the children the caller expects this one to wake
-- ARGV[1] subscriber   ARGV[2] calls to pull at most
-- ARGV[3] now (ms), or 'server': the server's clock (a pull sent behind a wait)
-- ARGV[4] wake cap   ARGV[5] batch limit for drops
-- ARGV[6] the longest body copied (the worker's max_message_bytes)
-- ARGV[7..] subscribers (KEYS[13..])
-- Returns: {pulled, skipped, more, note, woken, missed}: skipped counts calls dropped
-- (over maxlen or ttl) before this subscriber pulled them; more is 1 when calls wait
-- in the log or the lane (a token is then left on the lane's wake list for another
-- worker); note is '' or says what of another's data was skipped or replaced;
-- woken lists the children to wake (none unless calls were pulled), missed those of
-- them whose wake list was not in KEYS (the caller wakes them: broadcast_wake.lua).
-- Invariant: a subscriber's calls enter its lane in the order they were sent,
-- each once: the cursor moves past a call in the step that puts it in the lane.
-- A subscriber with no cursor subscribes here, from the last call sent. A pull
-- that moved calls wakes the lanes of its WAKE_FANOUT children (broadcast_lib.lua);
-- on the worker's clock it prunes at most PRUNE_BATCH stale subscribers (aged by the
-- server's clock).
-- Cost: O(log n) in the subscribers, O(calls pulled + dropped) in the calls.
-- Data minitask did not write (lib.lua): cursors, the lane's messages or its
-- ready list of another type makes the call pull nothing and write nothing (the
-- note says which key: the worker serves its other queues); a cursor that is no
-- whole number up to the last sequence (nan, inf, 1.5, 1e300) restarts from the
-- oldest call still logged (at least once: a call may run twice), except one past
-- the last sequence handed out (no pull wrote it: planted), or one above its place in
-- the index (set_cursor writes both: planted), set back to its place
-- (set_back_ahead: what minitask last wrote for it; the note says so, as it
-- does for one a send set back); seen or wake
-- of another type is left as it is; state's maxlen or ttl that is no whole number
-- from 1 up (nan, inf, -5, 0, 1.5) is read as missing: nothing is dropped over them
-- until a send writes them again. A body longer than ARGV[6] (and 64 kB), which no
-- minitask writes (planted: 50 MB), is measured (HSTRLEN, O(1)) and never read nor
-- copied into the lane: this subscriber passes the call by (its cursor moves on; the
-- call stays for the others, each passing it by as it meets it) and the note names
-- the key, the call and its length (said once by the worker, and in Redis's log).
local name, want, now = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local cap, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
-- the server's clock read before any write (seen_at needs it too): a user whose ACL
-- lacks TIME is refused with nothing written, never made a subscriber part way
local server = server_ms()
if now == 'server' then now = string.format('%.0f', server) end
for i, kind in pairs({[5] = 'hash', [10] = 'hash', [11] = 'list'}) do
  if not guards().fits(KEYS[i], kind) then
    return {0, 0, 0, 'key ' .. KEYS[i] .. ' holds another type than the ' .. kind ..
            ' minitask keeps there; this subscriber pulls nothing until it is renamed or deleted',
            {}, {}}
  end
end
-- seq, and a set-back a send or a check left for this pull to say (ahead_field),
-- read together (one value longer than minitask writes: state_of's)
local held = tolerant(false, 'HMGET', KEYS[1], 'seq', ahead_field(name))
local seq_raw, pending = held and held[1], held and held[2]
if seq_raw and #seq_raw > FIELD_MOST then seq_raw = state_of('seq') end
local seq = guards().whole(seq_raw, 0, MAX_SCORE)
-- the cursor measured before it is read: one longer than any minitask writes (planted:
-- 50 MB, a 5 s stall read whole) is no sequence, never read; set_cursor rewrites it below
local raw = redis.call('HSTRLEN', KEYS[5], name)
if raw > FIELD_MOST then
  raw = '(a value ' .. raw .. ' bytes long)'
else
  raw = redis.call('HGET', KEYS[5], name)
end
local cursor = raw and guards().whole(raw, 0, seq or MAX_SCORE)
if raw and not cursor and seq and guards().whole(raw, 0, MAX_SCORE) then
  -- a seq set back below the cursor is read as the highest sequence the log and the
  -- cursors show, as a send starts again from it (only one above them all is planted)
  seq = math.max(seq, high_water({KEYS[7], KEYS[2], KEYS[8]}))
  cursor = guards().whole(raw, 0, seq)
end
local note = ''
local ahead = raw and not cursor and seq and guards().whole(raw, 0, MAX_SCORE)
-- its place in the index: set_cursor writes it with the cursor, so a cursor above it
-- no pull wrote (planted: it would skip the calls between); none (a subscriber of an
-- older layout, the hash only) tells nothing, and the cursor is kept
local place = raw and tolerant(false, 'ZSCORE', KEYS[7], name)
local set_back = pending
if ahead then
  -- past every sequence handed out: no pull wrote it (planted), it is set back (to
  -- its place: what minitask last wrote for it), never a restart of every call
  cursor = set_back_ahead(name, ahead, place, seq)
  set_back = tolerant(false, 'HGET', KEYS[1], ahead_field(name))
elseif cursor then
  local at = guards().whole(place, 0, MAX_SCORE)
  if at and cursor > at then
    cursor = set_back_ahead(name, cursor, at, MAX_SCORE, true)
    set_back = tolerant(false, 'HGET', KEYS[1], ahead_field(name))
  end
end
-- a cursor set back as ahead (here, or by a send before its calls took their
-- sequences): said in the worker's log (its note), once
if set_back then
  tolerant(0, 'HDEL', KEYS[1], ahead_field(name))
  local was, back, kind = string.match(set_back, '^(%d+) (%d+)( ?%a*)$')
  if was then
    note = 'cursor ' .. was .. ' of ' .. KEYS[5] .. ' was ' ..
           (kind == ' place' and ('past its place ' .. back .. ' in ' .. KEYS[7] ..
                                  ', which minitask writes with it ')
                             or 'past the last call sequence ') ..
           '(data minitask did not write): set back to ' .. back .. ', so that it takes ' ..
           'no later call for a pulled one (calls after ' .. back .. ' run)'
  end
end
if not cursor then
  -- no cursor: subscribe from the last call sent, as a new subscriber does; one
  -- that is no sequence (nan, inf, 1.5, past the last call): at least once, from
  -- the oldest call still logged (calls it ran may run again, none is lost); a
  -- seq missing or no sequence is read as the subscribe script reads it
  cursor = math.max(seq or 0, high_water({KEYS[7], KEYS[2], KEYS[8]}))
  if raw then
    local oldest = tolerant({}, 'ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]
    oldest = oldest and guards().whole(oldest, 1, cursor)
    if oldest then cursor = oldest - 1 end
    note = 'cursor ' .. string.format('%q', string.sub(raw, 1, 64)) .. ' of ' .. KEYS[5] ..
           ' is no call sequence; the subscriber restarts from the oldest call still logged' ..
           ' (calls it ran already may run again)'
  end
  set_cursor(name, cursor)
  if not raw then tolerant(0, 'ZADD', KEYS[8], string.format('%.0f', cursor), name) end
end
seen_at(name, now)
-- A subscriber back after a quiet spell must not run calls past broadcast_ttl
-- that no send has dropped since. Only on the worker's clock, as sends (a pull
-- behind a wait reads the server's, and comes when nobody was behind).
if want > 0 and ARGV[3] ~= 'server' then
  -- limits no send wrote (nan, inf, -5, 0, 1.5, text) are read as missing: none
  local maxlen = guards().whole(state_of('maxlen'), 1, MAX_SCORE)
  local ttl = guards().whole(state_of('ttl'), 1, MAX_SCORE)
  if maxlen and ttl then
    drop_over(tonumber(now), maxlen, ttl, limit)
    prune(ttl)
  end
end
local skipped = 0
local dropped = guards().whole(state_of('dropped'), 0, seq or MAX_SCORE)
  or 0
if cursor < dropped then
  skipped = dropped - cursor
  cursor = dropped
end
local pulled = 0
local most = tonumber(ARGV[6])
local passed, passed_first, passed_length = 0, nil, 0
if want > 0 then
  local calls = tolerant({}, 'ZRANGEBYSCORE', KEYS[2], string.format('(%.0f', cursor), '+inf',
                         'WITHSCORES', 'LIMIT', 0, want)
  for i = 1, #calls, 2 do
    local id = calls[i]
    -- measured before it is read (as fetch.lua measures a message): one longer than
    -- the worker's max_message_bytes is passed by unread, never copied into the lane
    local size = tolerant(0, 'HSTRLEN', KEYS[3], id)
    local body = false
    if size > 65536 and size > most then
      passed = passed + 1
      if not passed_first then passed_first, passed_length = id, size end
    elseif size > 0 then
      body = tolerant(false, 'HGET', KEYS[3], id)
    end
    -- an id its lane still holds (a re-sent id whose last run is dead) is not doubled
    if body and redis.call('HSETNX', KEYS[10], id, body) == 1 then
      redis.call('RPUSH', KEYS[11], id)
      pulled = pulled + 1
    end
    cursor = guards().whole(calls[i + 1], cursor, MAX_SCORE) or cursor
  end
end
if passed > 0 then
  local said = 'call ' .. string.format('%q', string.sub(passed_first, 1, 64)) .. ' of ' ..
    KEYS[3] .. ' is ' .. passed_length .. ' bytes long, more than max_message_bytes (' ..
    most .. '): passed by unread, not copied into the lane'
  if passed > 1 then said = said .. ' (and ' .. (passed - 1) .. ' more call(s) so long)' end
  redis.log(redis.LOG_WARNING, (string.gsub('minitask: subscriber ' .. string.sub(name, 1, 64)
    .. ': ' .. said, '[^ -~]', function(byte) return string.format('\\x%02x', string.byte(byte)) end)))
  note = note == '' and said or note .. '; ' .. said
end
if want > 0 or skipped > 0 then
  set_cursor(name, cursor)
  drop_pulled(limit, seq)
end
local woken, missed = {}, {}
if pulled > 0 then
  -- the wake-up spreads: this subscriber's children, the newest subscribed first
  local _, rank = wake_read(false, function(key)
    return tolerant(REFUSED, 'ZREVRANK', key, name)
  end)
  if rank then woken, missed = wake_from(WAKE_FANOUT * (rank + 1), pulled, cap, 13, 7) end
end
local more = redis.call('LLEN', KEYS[11]) > 0 or #tolerant({}, 'ZRANGEBYSCORE', KEYS[2],
  string.format('(%.0f', cursor), '+inf', 'LIMIT', 0, 1) > 0
if more then
  local kept = tolerant(cap, 'LLEN', KEYS[12])
  if kept < cap then tolerant(0, 'RPUSH', KEYS[12], '1') end
end
return {pulled, skipped, more and 1 or 0, note, woken, missed}
