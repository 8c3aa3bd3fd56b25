-- groups_top: a fair queue's counts of grouped ready tasks, for status, the dashboard and
-- /metrics: its counter, how many groups hold ready tasks, and its largest backlogs.
-- KEYS[1] groups_ready (STRING)   KEYS[2] groups (ZSET)   KEYS[3] groups_solo (HASH)
-- ARGV[1] the largest count read   ARGV[2] backlogs listed, at most
-- ARGV[3] the longest group name minitask writes (bytes)
-- ARGV[4] the longest count minitask writes (bytes)
-- Returns {the counter or false, the groups counted (ZCOUNT 1 to ARGV[1]) or false,
--   the largest backlogs (name, score...) or false, the lengths of names removed, the
--   length of a counter longer than ARGV[4] or 0, the solo groups of groups_solo
--   (HLEN: each holds one ready task, counted in neither the counter nor groups; 0 for
--   a key of another type)}: false for a key of another type (data minitask did not
--   write: none shown), then while groups lists fewer backlogs than ARGV[2], solo
--   groups' names (one HSCAN page), to fill the list, each with one ready task.
-- A counter longer than ARGV[4] (planted: 50 MB, sent whole to every status call) is
-- measured (STRLEN) and never read: false, its length the fifth element. It is left
-- for the fetches, which start a count that is no number afresh.
-- A group name longer than ARGV[3] (planted: 50 MB, sent whole to every status call,
-- page and scrape) is never sent: it is removed (lib.lua's bounded_members), its length
-- returned for the caller's log. Invariant: writes nothing else.
local removed = {}
local top = redis.pcall('ZREVRANGEBYSCORE', KEYS[2], ARGV[1], '1', 'WITHSCORES', 'LIMIT', '0',
                        ARGV[2])
if top.err then return {false, false, false, removed, 0, 0, {}} end
top = bounded_members(KEYS[2], top, 2, tonumber(ARGV[3]), removed)
local ready, longer = false, redis.pcall('STRLEN', KEYS[1])
if type(longer) == 'table' then
  longer = 0  -- another type: no count
elseif longer <= tonumber(ARGV[4]) then
  ready, longer = redis.call('GET', KEYS[1]), 0
end
local solo = redis.pcall('HLEN', KEYS[3])
if type(solo) ~= 'number' then solo = 0 end
local wanted, names = tonumber(ARGV[2]) - #top / 2, {}
if solo > 0 and wanted > 0 then
  local page = redis.call('HSCAN', KEYS[3], '0', 'COUNT', ARGV[2])[2]
  for i = 1, #page, 2 do
    if #names >= wanted then break end
    if #page[i] <= tonumber(ARGV[3]) then names[#names + 1] = page[i] end  -- (a longer: unsent)
  end
end
return {ready, redis.call('ZCOUNT', KEYS[2], '1', ARGV[1]), top, removed, longer, solo, names}
