-- broadcast_pull: move a subscriber's next calls from the broadcast log into its
-- lane (a queue of its own, served by fetch.lua), advancing its cursor; then
-- delete the calls every subscriber has pulled. Count 0 only re-arms the wake.
-- On the worker's clock it first drops what is over the last send's
-- broadcast_maxlen / broadcast_ttl (state's maxlen and ttl), as a send does.
-- KEYS[1..5] as broadcast_lib.lua   KEYS[6] bcast:seen (HASH)
-- KEYS[7] the lane's messages (HASH)   KEYS[8] the lane's priority 9 ready list
-- KEYS[9] the lane's wake list
-- ARGV[1] subscriber   ARGV[2] calls to pull at most
-- ARGV[3] now (ms), or 'server': the server's clock (a pull sent behind a wait)
-- ARGV[4] wake cap   ARGV[5] batch limit for drops
-- Returns: {pulled, skipped, more}: skipped counts calls dropped (over maxlen or
-- ttl) before this subscriber pulled them; more is 1 when calls wait in the log
-- or the lane (a token is then left on the lane's wake list for another worker).
-- Invariant: a subscriber's calls enter its lane in the order they were sent,
-- each once: the cursor moves past a call in the step that puts it in the lane.
-- A subscriber with no cursor subscribes here, from the last call sent.
-- Data minitask did not write (lib.lua): cursors, the lane's messages or its
-- ready list of another type refuses the call before any write; seen or wake of
-- another type is left as it is.
local name, want, now = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local cap, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
if now == 'server' then
  local clock = redis.call('TIME')
  now = string.format('%.0f', tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000))
end
guards().expect(KEYS[5], 'hash')
guards().expect(KEYS[7], 'hash')
guards().expect(KEYS[8], 'list')
local cursor = tonumber(redis.call('HGET', KEYS[5], name))
if not cursor then
  cursor = tonumber(tolerant(false, 'HGET', KEYS[1], 'seq')) or 0
  redis.call('HSET', KEYS[5], name, string.format('%.0f', cursor))
end
tolerant(0, 'HSET', KEYS[6], name, now)
-- A subscriber back after a quiet spell must not run calls past broadcast_ttl
-- that no send has dropped since. Only on the worker's clock, as sends (a pull
-- behind a wait reads the server's, and comes when nobody was behind).
if want > 0 and ARGV[3] ~= 'server' then
  local maxlen = tonumber(tolerant(false, 'HGET', KEYS[1], 'maxlen'))
  local ttl = tonumber(tolerant(false, 'HGET', KEYS[1], 'ttl'))
  if maxlen and ttl then drop_over(tonumber(now), maxlen, ttl, limit) end
end
local skipped = 0
local dropped = tonumber(tolerant(false, 'HGET', KEYS[1], 'dropped')) or 0
if cursor < dropped then
  skipped = dropped - cursor
  cursor = dropped
end
local pulled = 0
if want > 0 then
  local calls = tolerant({}, 'ZRANGEBYSCORE', KEYS[2], string.format('(%.0f', cursor), '+inf',
                         'WITHSCORES', 'LIMIT', 0, want)
  for i = 1, #calls, 2 do
    local id = calls[i]
    local body = tolerant(false, 'HGET', KEYS[3], id)
    -- an id its lane still holds (a re-sent id whose last run is dead) is not doubled
    if body and redis.call('HSETNX', KEYS[7], id, body) == 1 then
      redis.call('RPUSH', KEYS[8], id)
      pulled = pulled + 1
    end
    cursor = tonumber(calls[i + 1]) or cursor
  end
end
if want > 0 or skipped > 0 then
  redis.call('HSET', KEYS[5], name, string.format('%.0f', cursor))
  drop_pulled(limit)
end
local more = redis.call('LLEN', KEYS[8]) > 0 or #tolerant({}, 'ZRANGEBYSCORE', KEYS[2],
  string.format('(%.0f', cursor), '+inf', 'LIMIT', 0, 1) > 0
if more then
  local kept = tolerant(cap, 'LLEN', KEYS[9])
  if kept < cap then tolerant(0, 'RPUSH', KEYS[9], '1') end
end
return {pulled, skipped, more and 1 or 0}
