-- broadcast_send: add calls to a queue's broadcast log for every subscriber, and
-- wake idle workers of the first subscribers (the wake-up spreads from them, see
-- broadcast_lib.lua's wake_from).
-- KEYS[1..9] as broadcast_lib.lua   KEYS[10] bcast:names (HASH)   KEYS[11] bcast:joins (ZSET)
-- KEYS[12..] the wake lists of the lanes of the n subscribers in ARGV[7..]: those the
--   caller expects to be woken first (the last send's)
-- ARGV[1] now (ms)   ARGV[2] broadcast_maxlen (calls)   ARGV[3] broadcast_ttl (ms),
--   both kept in state (maxlen, ttl) for pulls, the longest ttl as prune_ttl
-- ARGV[4] wake cap   ARGV[5] batch limit for drops   ARGV[6] n   ARGV[7..6+n] subscribers
--   then per call: id, encoded message
-- Returns: {calls added (an id sent already is left as it is), woken, missed}: the
-- subscribers to wake, and those of them whose wake list was not in KEYS (the
-- caller wakes them: broadcast_wake.lua).
-- Invariant: a call in the log is pulled by each subscriber whose cursor is below
-- its sequence (or dropped over maxlen / ttl). joins keeps each call's sequence:
-- join() waits for the subscribers that subscribed before it (since's score below
-- it); names holds the subscribers of calls an older minitask sent, read as they
-- were. Log and joins hold at most maxlen calls when it returns, however many it
-- carried. Cost: O(log n) in the subscribers (none is read one by one), O(calls
-- added + dropped) in the calls, at most PRUNE_BATCH stale subscribers pruned.
-- Data minitask did not write (lib.lua): cursors, state, log, bodies, sent, names or joins
-- of another type refuses the call before any write; a sequence that is missing, no
-- number, or below a cursor or a logged call, starts again above every cursor and
-- logged call (so no subscriber takes the next call for one it pulled already); a
-- cursor past the sequence, which no pull wrote (its place is not), is set back
-- before the calls take theirs (set_back_ahead: the 16 least places; one within the
-- sequences above its place is set back by its own pull); a wake list of another
-- type gets no token.
local now, maxlen, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local cap, limit, n = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
guards().expect(KEYS[5], 'hash')
guards().expect(KEYS[1], 'hash')
guards().expect(KEYS[2], 'zset')
guards().expect(KEYS[3], 'hash')
guards().expect(KEYS[4], 'hash')
guards().expect(KEYS[10], 'hash')
guards().expect(KEYS[11], 'zset')
local _, longest = prune(ttl)
local subscribed = redis.call('HLEN', KEYS[5]) > 0
-- the sequence is above every cursor and every call logged: one that is missing
-- (deleted, evicted), no number, or below them (set back by hand, or planted) starts
-- again above them all, so that no subscriber takes the next call for one it pulled
-- already (it would never run); a missing one with nothing logged is a first send
local seq_now = state_of('seq')  -- (a hash: checked above)
local top = high_water({KEYS[7], KEYS[2], KEYS[11]})
local held = guards().whole(seq_now, 0, MAX_SCORE)
local last = held or 0
if (seq_now and not held) or last < top then
  last = top
  redis.call('HSET', KEYS[1], 'seq', top)
  redis.log(redis.LOG_WARNING, 'minitask: ' .. KEYS[1] .. ' seq held no call sequence ' ..
            'above every cursor and logged call; started again at ' .. top)
end
-- before any call takes a sequence: a cursor past the last one handed out (planted;
-- its place in the index is not) is set back, so that it takes no call for one it
-- pulled (PLACE_BATCH a send: every subscriber of a queue of PLACE_BATCH or fewer;
-- drop_pulled's checks below, the least and any a check finds)
local before = last
local least = subscribed and set_back_cursors_ahead(last) or nil
local added = 0
for i = 7 + n, #ARGV, 2 do
  local id = ARGV[i]
  if not redis.call('ZSCORE', KEYS[11], id) and redis.call('HEXISTS', KEYS[10], id) == 0 then
    local seq = guards().bump(KEYS[1], 'seq', 1)
    last = seq
    redis.call('ZADD', KEYS[11], seq, id)
    if subscribed then  -- with no subscriber, nobody would ever pull it
      redis.call('ZADD', KEYS[2], seq, id)
      redis.call('HSET', KEYS[3], id, ARGV[i + 1])
      redis.call('HSET', KEYS[4], id, now)
    end
    added = added + 1
  end
end
-- the sender's limits, for the pull of a subscriber coming back after no send
-- and the longest ttl given, for prunes: an app given a short one by mistake does
-- not prune the subscribers of the others
if added > 0 then
  redis.call('HSET', KEYS[1], 'maxlen', ARGV[2], 'ttl', ARGV[3], 'prune_ttl',
             string.format('%.0f', math.max(longest, ttl)))
end
-- a send drops as many calls as it added, and a batch more: however many calls
-- one send carries, the log is back within maxlen when it returns
drop_over(now, maxlen, ttl, limit + added)
drop_pulled(limit, last, before, least)
-- join() reads the subscribers of the last maxlen calls at most
local extra = tonumber(redis.call('ZCARD', KEYS[11])) - maxlen
if extra > 0 then
  local ids = redis.call('ZRANGE', KEYS[11], 0, math.min(extra, limit + added) - 1)
  per_thousand('ZREM', KEYS[11], ids)
  per_thousand('HDEL', KEYS[10], ids)
end
local woken, missed = {}, {}
if added > 0 and subscribed then woken, missed = wake_from(0, added, cap, 12, 7) end
return {added, woken, missed}
