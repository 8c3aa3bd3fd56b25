-- purge_ready: delete a batch of a queue's ready tasks for good (minitask purge),
-- those parked by flow control (flow.lua) included: they are ready, held by a limit.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] dead (ZSET)
-- KEYS[4] messages (HASH)   KEYS[5] deliveries (HASH)   KEYS[6] retrying (HASH)
-- KEYS[7] cancelled (ZSET)   KEYS[8] order (HASH)
-- KEYS[9..18] ready lists, priority 9 first
-- KEYS[19] flow (HASH)   KEYS[20] flow_due (ZSET)   KEYS[21] flow_limiters (SET)
-- KEYS[22] the flow prefix (flow.lua: each limiter's park list is built from it,
--   under the queue's hash tag; keys.py says why it is not declared)
-- KEYS[23] flow_parked (STRING)
-- ARGV[1] most ready-list and park-list entries to take in this call
-- Returns: {tasks deleted, entries taken}; the caller calls again while the
-- second equals ARGV[1], so that no call blocks Redis for long.
-- Only ready tasks go: an entry whose task is leased, delayed or dead is a stale
-- entry (fetch would drop it too) and its task is left alone. A deleted task's
-- flow spec goes with it. A limiter whose park list is emptied leaves the limiter
-- set; once every one is empty, the parked count is 0.
-- Fair queues (flow.lua): the ready sets of the groups listed in <prefix>groups are
-- emptied too (a solo group's task, held in its turn's claim, with them), and each
-- emptied group's turn and entry go (a token left in a ready
-- list is stale then, and dropped by the fetch that meets it); the grouped ready
-- count goes down by as many. A token popped from a ready or park list whose claim is
-- live in groups_solo (':', a solo group of a plain task) takes its task and claim
-- with it. Slots held by running tasks stay theirs.
-- Data minitask did not write (lib.lua): flow keys of another type count as empty;
-- any of KEYS[1..18] of another type refuses the call (WRONGTYPE, naming it) before
-- any write: nothing is deleted.
-- Refused part way (an ACL changed since the check): groups_ready's DECRBY is asked
-- before the groups' tasks go (lib.lua's countable), so it is never left above them.
local limit = tonumber(ARGV[1])
local deleted, taken = 0, 0
for i = 1, 18 do
  guards().expect(KEYS[i], (i <= 3 or i == 7) and 'zset' or (i <= 8 and 'hash' or 'list'))
end

local solos = KEYS[22] .. 'groups_solo'
local purge

-- a solo group's token whose claim is live in groups_solo: its task purged, its claim
-- gone (flow.lua; its token counted the task, which groups_ready does not)
local function purge_solo(token)
  local gen, member, group = string.match(token, '^\255([^\255/:]*:[0-9]([ -~]*))\255(.+)$')
  if gen and tolerant(false, 'HGET', solos, group) == gen then
    tolerant(0, 'HDEL', solos, group)
    purge(member)
  end
end

function purge(id)
  if string.byte(id) == 255 then purge_solo(id) end
  taken = taken + 1
  redis.call('ZREM', KEYS[7], id)
  if not (redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)
          or redis.call('ZSCORE', KEYS[3], id)) then
    deleted = deleted + redis.call('HDEL', KEYS[4], id)
    redis.call('HDEL', KEYS[5], id)
    redis.call('HDEL', KEYS[6], id)
    redis.call('HDEL', KEYS[8], id)
    tolerant(0, 'HDEL', KEYS[19], id)
  end
end

local band = 9
while taken < limit and band <= 18 do
  local id = redis.call('LPOP', KEYS[band])
  if not id then band = band + 1 else purge(id) end
end
if taken < limit then
  local emptied, popped = true, 0
  for _, limiter in ipairs(tolerant({}, 'SMEMBERS', KEYS[21])) do
    local park = KEYS[22] .. limiter .. ':park'
    while taken < limit do
      local entry = tolerant(false, 'LPOP', park)
      if not entry then break end
      -- a priority digit, then the id (or a group's token: flow_parked counts no token)
      if string.byte(entry, 2) ~= 255 then popped = popped + 1 end
      purge(string.sub(entry, 2))
    end
    if taken >= limit then
      emptied = false
      break
    end
    tolerant(0, 'ZREM', KEYS[20], limiter)  -- nothing parked: nothing to try
    tolerant(0, 'SREM', KEYS[21], limiter)
  end
  if emptied then
    -- no park list holds anything (a key of another type is not minitask's to delete)
    if redis.call('TYPE', KEYS[23]).ok == 'string' then redis.call('DEL', KEYS[23]) end
  elseif popped > 0 then
    -- (gone at 0: an empty queue leaves nothing behind; a count that is no integer,
    -- or a key of another type, is left as it is)
    local total = redis.pcall('DECRBY', KEYS[23], popped)
    if type(total) == 'number' and total <= 0 then redis.call('DEL', KEYS[23]) end
  end
end
if taken < limit then
  local prefix = KEYS[22]
  local popped = 0
  -- each group emptied leaves the groups set, so its first ones are the next to go;
  -- a group counts as one entry taken, so a call stays bounded however many there are
  local batch = tolerant({}, 'ZRANGE', prefix .. 'groups', 0, 99)
  -- the count lowered after the groups' tasks go, asked first (lib.lua's countable):
  -- refused after, it stayed up for good
  if batch[1] then guards().countable('DECRBY', prefix .. 'groups_ready') end
  while taken < limit and #batch > 0 do
    for _, group in ipairs(batch) do
      local ready = prefix .. 'g:' .. group .. ':ready'
      while taken < limit do
        local entry = tolerant({}, 'ZPOPMIN', ready)
        if not entry[1] then break end
        popped = popped + 1
        -- its priority's digit, then its id (flow.lua); one without is an id as it is
        if string.find(entry[1], '^%d') then
          purge(string.sub(entry[1], 2))
        else
          purge(entry[1])
        end
      end
      if taken >= limit then break end
      taken = taken + 1
      -- a solo group's one task is in its turn's claim (flow.lua): '<now>.<count>/' (or
      -- ':'), its priority's digit and its id
      local turn = prefix .. 'g:' .. group .. ':turn'
      local member = string.match(tolerant(false, 'HGET', turn, 'tok') or '',
                                  '^%-?%d+%.%d+[/:](.*)$')
      if member then
        popped = popped + 1
        purge(string.find(member, '^%d') and string.sub(member, 2) or member)
      end
      tolerant(0, 'DEL', turn)
      tolerant(0, 'ZREM', prefix .. 'groups', group)
    end
    batch = taken < limit and tolerant({}, 'ZRANGE', prefix .. 'groups', 0, 99) or {}
  end
  if popped > 0 then
    local total = redis.pcall('DECRBY', prefix .. 'groups_ready', popped)
    if type(total) == 'table' then  -- no count minitask wrote: started afresh (lib.lua)
      total = guards().recount(total, prefix .. 'groups_ready', -popped)
    end
    if total and total <= 0 then redis.call('DEL', prefix .. 'groups_ready') end
  end
end
return {deleted, taken}
