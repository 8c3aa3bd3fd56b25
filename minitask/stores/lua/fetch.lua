-- fetch: promote due delayed tasks (promote.lua, prepended by stores/scripts.py),
-- re-deliver expired leases, then lease the best ready tasks, in one atomic step
-- any number of workers may run at once.
-- KEYS[1] delayed (ZSET)     KEYS[2] leases (ZSET)     KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)  KEYS[5] wake (LIST)       KEYS[6] dead (ZSET)
-- KEYS[7..16] ready lists, priority 9 first (KEYS[16 - p] holds priority p)
-- KEYS[17] cancelled (ZSET)   KEYS[18] order (HASH)
-- KEYS[19] flow (HASH)   KEYS[20] flow_due (ZSET)   KEYS[21] the flow prefix (flow.lua)
-- KEYS[22] flow_limiters (SET)   KEYS[23] flow_parked (STRING)
-- ARGV[1] now (ms, in decimal digits), or 'server': the server's clock, for a fetch
--   sent ahead of the moment it runs (behind a BLPOP)
-- ARGV[2] lease length (ms)   ARGV[3] how many to lease
-- ARGV[4] max deliveries
-- ARGV[5] batch limit for promotion, reclaim and stale entries dropped
-- ARGV[6] with a `now`, the lease deadline, now + ARGV[2], in decimal digits (else '')
-- ARGV[7] the longest message read (bytes: the app's max_message_bytes): a longer one
--   is leased unread, a mark in its place (body_of below)
-- Numbers sent to Redis go as text where the call has it (ARGV as it came, a
-- literal): Redis formats a Lua number with snprintf, about 3,000 instructions each.
-- Returns: {head, then id and message per leased task, then the poisoned ids, then
--   the expired ids, then, only when the fetch dropped entries longer than any
--   minitask writes (promote.lua's OVERLONG), one more: a 'key length' line each}:
--   few elements, as the worker's RESP parser pays per element (in Python, about
--   20 us for the dozen of a nested reply). head is a line of numbers:
--   next_event_ms, flow, how many poisoned, how many expired, then the delivery
--   number and priority of each leased task, then the priority of each expired one.
--   next_event_ms: earliest delayed due time, lease deadline or time a limit
--     frees (flow_due), or -1; `now` when the fetch leased all it asked for (the
--     next event is not read then)
--   poisoned: ids whose lease expired max-deliveries times; they stay leased
--     (expired) until the caller dead-letters them, so nothing is lost if it dies
--   expired: tasks whose expiry had passed; they are leased so that the caller
--     ends them (cancelled, "Expired"), as for poisoned
--   flow: 1 when the flow hash held anything as the fetch began, else 0; 2 in
--     place of 1 when no task it leased has a spec whose lease holds a slot
--     (max_running, group_max_running: flow.lua's finish would only drop their
--     specs; a spec that does not parse holds none either), nor gets one while
--     its lease is held (as below): its ack drops the specs unread. With 0,
--     no task it leased has a spec, nor gets one while its lease is held (a fetch
--     writes none; enqueue_flow.lua writes one for an id that is not pending or
--     is delayed, revive.lua for a dead one): its ack needs no flow finish (ack.lua)
-- Flow control (flow.lua), only while the flow hash holds anything: first the
-- limiters due in flow_due hand out their parked tasks while their limits allow;
-- then a popped task over its limit, or whose limiter has tasks parked already,
-- is parked (not leased, not re-queued) and the ready lists behind it go on
-- being served. Parking counts against the batch limit, so a fetch stays bounded.
-- Fair queues (flow.lua's flow_fair, only while the flow hash holds anything): a
-- popped group token (a byte 255 first: never an id) leases its group's first task as
-- the group's limits allow and goes back to its list; a popped grouped id (due, put
-- back, its lease expired) joins its group's ready set. The due loop puts a due group
-- ('g:<group>' in flow_due) back into the rotation. A group whose task's own limits
-- (rate_limit, max_running) hold its first task has its token parked in that
-- limiter's park list, and the due loop serves it again in its place. A key a
-- grouped task or a token is written to that holds another type (data minitask did
-- not write) is moved aside whole (flow.lua's flow_quarantine): nothing is lost.
-- Invariant: a live task is in exactly one of: a ready list, delayed, leases, dead,
-- (flow control) its limiter's park list, or (fair queues) its group's ready set.
-- A refusal part way (an ACL changed while a worker runs: Redis keeps what the call
-- wrote before it) keeps it: every entry popped from a ready list and not yet leased,
-- parked or served goes back to the head of its list in its order (serve_lists below),
-- one taken from a park list to the head of that list (the due loop), exactly once (a
-- token flow.lua's serve() put back already is `placed`); a refused read is raised,
-- never taken for what it read.
-- A group with eligible ready tasks has one live token in a ready list (or is due in
-- flow_due); tokens are no tasks and leave no trace when their group empties. A
-- limiter is in flow_limiters while its park list holds entries (added as the first
-- is parked, dropped as the last is taken: idle limiters leave nothing behind), and
-- flow_parked counts the entries, changed once per fetch that parks or takes any
-- (gone at 0).
-- Data minitask did not write (lib.lua), read so that a fetch goes on serving:
--   leases holding another type is moved aside whole (lib.lua's aside(): to
--   `key`:foreign, said in Redis's log) and counts as empty. A lease score
--   that is no whole number but has expired (1.5, -inf) goes back at priority 0;
--   one dated further ahead than any worker takes a lease for (the year 2096, inf)
--   is made due by a fetch that leases less than it asked for (next_event below),
--   and reclaimed as an expired one. Scores that are not finite count for no
--   next_event_ms.
--   A ready list, messages, dead, delayed, order or cancelled holding another
--   type counts as empty (a ready list of another type that an expired lease or
--   a due task goes back to is moved aside whole and made again: a refusal would
--   stop every fetch of the queue). A message longer than ARGV[7] is not read
--   (body_of).
--   A ready-list entry that is no id (empty, not UTF-8) or has no message is
--   dropped, as a cancelled one is. A delivery count that is no number starts
--   afresh at 1; in a deliveries key of another type none is kept (1, never
--   poisoned). A flow spec that does not parse, or holds a number beyond those
--   minitask writes, is no limit (said in Redis's log: flow.lua's flow_spec; never
--   an error after the task was taken); a park list of another
--   type leases the task without limits; other flow keys of another type count as
--   empty (flow.lua).

-- now_text: now's digits, for the reply and flow_due; horizon: now * 10 + 9, the
-- highest score due now; deadline: the lease deadline, as text (ARGV[6]) when the
-- caller sent it. now, as a number, only where it is used (flow control, fair queues,
-- a caller's clock before 1970 or no deadline sent): a tonumber() is a strtod
local now, now_text = nil, ARGV[1]
local horizon, deadline
local lead = string.byte(ARGV[1])
if ARGV[1] == 'server' then
  local clock = redis.call('TIME')
  now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  now_text = string.format('%.0f', now)
  horizon = now_text .. '9'
elseif lead and lead >= 48 and lead <= 57 then  -- decimal digits (the caller's b"%d")
  horizon = ARGV[1] .. '9'  -- ten times now, plus 9
  deadline = ARGV[6]
end
if not (horizon and deadline) then
  now = now or tonumber(ARGV[1])
  horizon = horizon or string.format('%.0f', now * 10 + 9)
  deadline = deadline or now + tonumber(ARGV[2])
end
-- the counts a worker sends most (prefetch 1, the batch limit 1000) told by a string
-- comparison (Lua compares short strings by address), any other read by tonumber()
local want = ARGV[3] == '1' and 1 or tonumber(ARGV[3])
local limit = ARGV[5] == '1000' and 1000 or tonumber(ARGV[5])
-- flow control is on while the flow hash holds a spec, or a limiter has tasks parked
-- (flow_limiters; one EXISTS of both, a hash being deleted as it empties): a flow hash
-- lost (deleted, evicted) with tasks parked would otherwise leave them parked for good,
-- the due loop never run. Those whose spec is lost run without limits (a spec lost is
-- no limit); a flow hash of another type reads as an empty one (every read tolerant)
local flow_on = redis.call('EXISTS', KEYS[19], KEYS[22]) > 0
if flow_on then now = now or tonumber(ARGV[1]) end
-- dead_any: dead may hold the popped ids (a ZSCORE each), unless one EXISTS found it
-- missing, asked when more than one task is wanted (nothing a fetch does adds to dead)
local dead_any = want < 2 or redis.call('EXISTS', KEYS[6]) == 1
local prefix = KEYS[21]
-- limits count on the server's clock: a caller's reading may be stale by the time
-- the call runs (a busy machine), which would let starts crowd a window. A caller's
-- clock far from the server's is a test's manual clock, and is kept. Read when a
-- limit is first counted: a fetch that counts none reads no clock.
-- flow_clock() and park_token() (below) are made only while flow control is on, and
-- unpark() only when a limiter is due: each closure a call makes costs Redis about
-- 1,000 instructions, used or not.
local flow_now, flow_clock, unpark, park_token, fair
local parked_change = 0  -- entries this fetch added to park lists, less those it took
if flow_on then
  function flow_clock()
    if flow_now then return flow_now end
    flow_now = now
    if ARGV[1] ~= 'server' then
      local clock = redis.call('TIME')
      local server = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
      if math.abs(server - now) < 10000 then flow_now = server end
    end
    return flow_now
  end
end

-- read and check everything first: promotion below is the first write
-- poisoned, reclaimed: made only when a lease has expired (a table costs Redis ~1,200
-- instructions)
local poisoned, reclaimed
local expired = redis.pcall('ZRANGEBYSCORE', KEYS[2], '-inf', horizon, 'WITHSCORES', 'LIMIT', '0',
                            ARGV[5])
if expired.err then
  -- leases of another type hold none of ours: moved aside whole (lib.lua's aside()),
  -- so the queue goes on (a refusal would stop every fetch of it until fixed)
  guards().displaced(expired, KEYS[2], 'zset')
  expired = {}
end
for i = 1, #expired, 2 do
  local id = expired[i]
  if #id > ID_MOST then  -- no id of ours (promote.lua): removed once, before any use
    redis.call('ZREM', KEYS[2], id)
    overlong_dropped(KEYS[2], #id)
    id = nil
  end
  local delivered = id and tonumber(tolerant(false, 'HGET', KEYS[4], id)) or 0  -- nan: never poisoned
  if not id then
    -- (dropped above)
  elseif delivered >= tonumber(ARGV[4])  -- max deliveries
     and id ~= '' and (not string.find(id, '[\128-\255]') or guards().utf8(id)) then
    poisoned = poisoned or {}
    poisoned[#poisoned + 1] = id
  else
    -- its worker died or stalled: back to the head of its priority
    reclaimed = reclaimed or {}
    reclaimed[#reclaimed + 1] = {id, guards().band_of(expired[i + 1], 7)}
  end
end
-- the first delayed task, read first (one ZRANGE): with none, no popped id is looked
-- for in delayed (delayed_any: nothing a fetch does adds to it), and with none due,
-- due_batch() is not called. A score of decimal digits (every score minitask writes) is
-- compared with horizon as text; any other, due_batch() reads. The end of the call reads
-- the first due time from here when nothing was promoted.
-- Delayed of another type holds none of ours: it counts as empty.
local first_delayed = redis.pcall('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')
local batch, delayed_any = nil, false
if first_delayed.err then
  guards().foreign(first_delayed)
else
  if first_delayed[1] and #first_delayed[1] > ID_MOST then  -- no id of ours (promote.lua)
    redis.call('ZREM', KEYS[1], first_delayed[1])
    overlong_dropped(KEYS[1], #first_delayed[1])
    first_delayed = redis.call('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')
  end
  delayed_any = #first_delayed > 0
  local score = first_delayed[2]
  if score and (#score < #horizon or (#score == #horizon and score <= horizon)
                or string.byte(horizon) == 45 or string.find(score, '[^0-9]')) then
    batch = due_batch(KEYS[1], KEYS[18], 7, now, ARGV[5], horizon)
  end
end
promote(KEYS[1], KEYS[18], batch)
if reclaimed then
  for _, entry in ipairs(reclaimed) do
    -- a ready list of another type is moved aside whole first (lib.lua's displaced())
    local pushed = redis.pcall('LPUSH', KEYS[entry[2]], entry[1])
    if type(pushed) == 'table' then
      guards().displaced(pushed, KEYS[entry[2]], 'list')
      redis.call('LPUSH', KEYS[entry[2]], entry[1])
    end
    -- the lease last: a refusal (an ACL changed while the worker runs) leaves it, and
    -- the task in its ready list too (its lease's NX drops that entry): never lost
    redis.call('ZREM', KEYS[2], entry[1])
  end
  if flow_on then
    -- a dead worker's max_running slots are freed with its leases
    local ids = {}
    for i, entry in ipairs(reclaimed) do ids[i] = entry[1] end
    flow_control().finish(KEYS[19], prefix, KEYS[20], KEYS[5], ids, false)
  end
end

-- a call per popped id, on the hottest path: redis.pcall, and lib.lua's
-- guards().foreign() only for an error
-- reply: the reply being built (see the header; its head goes first, at the end), with
-- the id and message of each leased task; numbers: their delivery numbers and priorities,
-- the priorities and a first delivery as text (table.concat formats a number with
-- snprintf, ~1,700 instructions; a later delivery's count is one). Both are
-- made at their size for one task (a table's growth is a rehash); expired: (id,
-- priority) of each task whose expiry had passed, made at the first
local reply, numbers, expired = {false, nil, nil}, {nil, nil}, nil
local band = 7
local dropped = 0
local slots = false  -- a task leased with a spec whose lease holds a slot (`flow` above)
local fair_served  -- flow.lua's fair queues, once a group's token is served: flush() at the end
-- hand: the entry the main loop below popped from KEYS[band] and has not yet leased,
-- parked, or handed to the fair library (which puts its token somewhere). What a
-- refusal part way puts back (below the loop), with a token that flow.lua's serve()
-- keeps in hand (serve(false) puts it back). The due loop's entry taken from a park
-- list is in hand the same way, until leased or served (put back by the due loop's)
local hand = nil

-- a stale entry (cancelled, or held elsewhere already) is dropped; once it is gone,
-- a cancelled id no longer needs leaving out of the counts. `held`: the id is
-- leased (a second entry of a running task), so its flow spec stays for its outcome
local function drop(id, held)
  tolerant(0, 'ZREM', KEYS[17], id)
  if flow_on and not held then tolerant(0, 'HDEL', KEYS[19], id) end
  dropped = dropped + 1
end

local function lease(id, body, priority, spec)
  -- deadline * 10 + 9 - priority: the deadline's digits and one more (priority is a
  -- digit, 0 to 9), or a number, which Redis writes whole (%.17g, below 2^53)
  local score
  if type(deadline) == 'string' then
    score = deadline .. string.sub('9876543210', priority + 1, priority + 1)
  else
    score = deadline * 10 + 9 - priority
  end
  -- the lease is its own check that the id is not held already (a stale entry:
  -- dropped), in place of a ZSCORE in body_of(). With flow control its limits were
  -- counted already: the start it did not make counts against them (on the safe side,
  -- and only for a stale entry)
  local leased = redis.pcall('ZADD', KEYS[2], 'NX', score, id)
  if leased ~= 1 then  -- (compared as a number: no type() call on the hot path)
    if leased == 0 then
      drop(id, true)
      return
    end
    -- refused after its pop (an ACL changed while the worker runs: NOPERM; leases of
    -- another type were moved aside above). The entry in hand from a ready list (the
    -- id, or the solo group's token that holds it) goes back with those popped ahead
    -- of their turn, as the main loop's refusal puts them (below), and one taken from
    -- a park list to its head, as the due loop's does; a task taken from its group's
    -- set (nothing in hand) goes back to the head of its priority's list before the
    -- error, so that it is not lost (pcall: a refusal of that too must not hide the
    -- first)
    if not hand then put_back(KEYS[16 - priority], {id}) end
    error(leased.err, 0)
  end
  -- leased: nothing in hand for a refusal after to put back, neither the id nor the
  -- solo group's token that held it (the fast path's: served, its claim removed by
  -- solo_flush(), a refusal's too; put back, it held a leased task, and the next fetch
  -- dropped it, its claim left with no token: a group stranded)
  hand = nil
  if spec and (spec.most > 0 or (spec.group_most or 0) > 0) then slots = true end
  local delivered = redis.pcall('HINCRBY', KEYS[4], id, '1')
  if type(delivered) == 'table' then delivered = guards().bump(KEYS[4], id, 1) end  -- not a count
  local digit = string.sub('0123456789', priority + 1, priority + 1)
  if spec and spec.expires > 0 and now >= spec.expires then
    expired = expired or {}
    expired[#expired + 1] = id
    expired[#expired + 1] = digit
    dropped = dropped + 1  -- bounded per fetch like stale entries: a mass expiry
    return
  end
  reply[#reply + 1] = id
  reply[#reply + 1] = body
  numbers[#numbers + 1] = delivered == 1 and '1' or delivered
  numbers[#numbers + 1] = digit
end

-- The message of a popped id, or false for an entry that is no id, is held
-- elsewhere already (delayed, dead; leased: lease() tells it) or has no message
-- (cancelled); then, for a group's token (a byte 255 first: no id holds it, not
-- UTF-8), true: the one place a popped entry is told a token.
local function body_of(id, ascii)
  -- printable ASCII (any id minitask makes) is told by one anchored match (`ascii`:
  -- true when the caller's own match told it already)
  ascii = ascii or string.find(id, '^[ -~]*$')
  if not ascii and string.byte(id) == 255 then return false, true end
  local body = id ~= ''
               and (ascii or not string.find(id, '[\128-\255]') or guards().utf8(id))
  -- a stale entry of an id held delayed or dead: the third value says so, and its
  -- drop keeps the id's flow spec, which is that task's (its id sent again, say)
  if body and delayed_any and redis.call('ZSCORE', KEYS[1], id) then
    return false, false, true
  end
  if body then
    local dead = dead_any and redis.pcall('ZSCORE', KEYS[6], id)
    if type(dead) == 'table' then guards().foreign(dead) dead = false end  -- dead of another type
    if dead then return false, false, true end
    -- measured before it is read (HSTRLEN, O(1)): one longer than ARGV[7], which no
    -- minitask writes (planted: 200 MB), would block Redis and swell the worker as it
    -- is copied; its lease answers a mark in its place ('\193', a byte no msgpack
    -- starts with, then its size), for the worker to dead-letter it unread (queue.py's
    -- Delivery.message). ARGV[7] is read (a strtod) only for one over 64 kB: a
    -- shorter message is read whatever the limit. (One HSTRLEN a task, some 3,500
    -- Redis instructions: no command measures several fields, and reading the leased
    -- messages by one HMGET at the end cost more than it saved)
    local size = redis.pcall('HSTRLEN', KEYS[3], id)
    if type(size) == 'table' then guards().foreign(size) return false end  -- another type
    if size > 65536 and size > tonumber(ARGV[7]) then return '\193' .. size end
    -- (redis.call: the HSTRLEN found no other type, so an error is a refusal, an ACL
    -- changed while the worker runs: raised, never taken for the task's message)
    body = redis.call('HGET', KEYS[3], id)
  end
  return body
end

-- fair queues (flow.lua's flow_fair): made at the first grouped task or token met,
-- once a call (flow.lua keeps it). A token is met with flow control off too (its
-- group's tasks all cancelled: their specs gone), so that the group's state goes
-- with it; flow_clock is none then, and no limit is counted
function fair()
  local made = flow_control().fair_made
  if made then return made end
  now = now or tonumber(ARGV[1])
  return flow_control().fair({prefix = prefix, first_ready = 7, now = now_text,
                              body_of = body_of, cancelled = KEYS[17], leases = KEYS[2],
                              flow = KEYS[19], flow_due = KEYS[20], clock = flow_clock,
                              messages = KEYS[3], dead = KEYS[6], delayed = KEYS[1]})
end

-- the limiters due by the caller's clock (as delayed tasks are): their parked tasks
-- first, oldest first, while their limits allow (one ZRANGEBYSCORE when none is due);
-- a group due ('g:<group>': a slot freed, its rate allows, resumed) is put back in
-- the rotation
if flow_on then
  -- (redis.pcall, lib.lua's guards().foreign() only for an error: tolerant() is a
  -- vararg call; a flow_due of another type has none due)
  local due = redis.pcall('ZRANGEBYSCORE', KEYS[20], '-inf', now_text, 'LIMIT', '0', ARGV[5])
  if due.err then guards().foreign(due) due = {} end
  if due[1] then
    -- take the first parked entry (`token`: a group's, which flow_parked does not
    -- count: no task); then, the entry leased, served or dropped, a limiter with none
    -- left is due no more (`emptied`, after: an entry put back on a refusal finds its
    -- limiter due still). Made only when a limiter is due (a closure costs the call
    -- some 1,000 instructions)
    function unpark(park, limiter, token, emptied)
      if not emptied then
        if tolerant(false, 'LPOP', park) and not token then parked_change = parked_change - 1 end
      elseif tolerant(0, 'LLEN', park) == 0 then
        flow_control().put('zset', 'ZREM', KEYS[20], limiter)
        flow_control().put('set', 'SREM', KEYS[22], limiter)
      end
    end
  end
  -- fair queues with flow control: park a group's token that its task's own limits
  -- hold (flow.lua's flow_held_by_task), at the tail of the limiter's park list, and
  -- have the limiter tried again when its rate allows; `tried`: the due loop below
  -- took it from the head of that list, where it goes back (its place kept), and one
  -- held for a slot waits for an outcome to free one
  function park_token(token, priority, held, tried)
    local limiter, retry_at = held[1], held[2]
    -- (a park list of another type is quarantined: the token is never lost)
    local parked = flow_control().write(
      'list', string.match(token, '^\255[^\255]*\255(.*)$') or '',
      tried and 'LPUSH' or 'RPUSH', prefix .. limiter .. ':park', priority .. token)
    flow_control().fair_made.placed = token  -- (parked: a refusal after puts it nowhere else)
    if parked == 1 then flow_control().put('set', 'SADD', KEYS[22], limiter) end
    if retry_at >= 0 and tried then
      flow_control().put('zset', 'ZADD', KEYS[20], retry_at, limiter)  -- it was due: due later now
    elseif retry_at >= 0 then
      flow_control().put('zset', 'ZADD', KEYS[20], 'LT', retry_at, limiter)
    elseif tried then
      flow_control().put('zset', 'ZREM', KEYS[20], limiter)
    else
      -- as for a task parked for a slot: looked at once more by the next fetch
      flow_control().put('zset', 'ZADD', KEYS[20], 'NX', flow_clock(), limiter)
    end
  end
  -- The due limiters served, under pcall when any is due: a refusal part way (an ACL
  -- changed while the worker runs: Redis keeps what the call wrote before it) puts the
  -- entry in hand (`hand`: taken from its park list, not yet leased nor served; a
  -- group's token that serve() or park_token() put in a list is `placed` there) back
  -- at the head of its park list (`back`: that list and the entry), where its limiter
  -- finds it due still (unpark's emptied step comes after). Made only when a limiter
  -- is due (a closure costs the call some 1,000 instructions, and 400 an upvalue)
  if due[1] then
    local back, back_entry
    local function serve_due()
      for i = 1, #due do  -- (no ipairs(): each of its steps is a C call)
        local limiter = due[i]
        local park = prefix .. limiter .. ':park'
        if string.sub(limiter, 1, 2) == 'g:' then
          flow_control().put('zset', 'ZREM', KEYS[20], limiter)
          fair().arm(string.sub(limiter, 3), false, true)  -- its turn's claim checked
        end
        while string.sub(limiter, 1, 2) ~= 'g:' and #numbers < want * 2 and dropped < limit do
          local entry = tolerant(false, 'LINDEX', park, 0)
          if not entry then
            flow_control().put('zset', 'ZREM', KEYS[20], limiter)
            flow_control().put('set', 'SREM', KEYS[22], limiter)
            break
          end
          if #entry > ENTRY_MOST then  -- no entry of ours (promote.lua): dropped once
            unpark(park, limiter, true)
            unpark(park, limiter, true, 'emptied')
            overlong_dropped(park, #entry)
            dropped = dropped + 1
            break  -- (the next fetch goes on with this limiter)
          end
          local id = string.sub(entry, 2)
          local priority = tonumber(string.sub(entry, 1, 1)) or 0
          local body, token, held = body_of(id)
          local spec = body and flow_control().spec(tolerant(false, 'HGET', KEYS[19], id), id,
                                                    KEYS[19])
          if token then
            -- a group's token its task's limits held: served as the group's turn, as if
            -- popped from the ready list it came from (where cancelled counts it)
            fair_served = fair()
            fair_served.placed = false
            back, back_entry, hand = park, entry, id
            unpark(park, limiter, true)
            flow_control().put('zset', 'ZADD', KEYS[17], priority, id)
            local taken, taken_body, taken_priority, taken_spec =
              fair_served.serve(id, limit - dropped)
            if taken_body and not taken then  -- held again: back at the head, this limiter done
              park_token(id, priority, taken_body, true)
              hand = nil
              dropped = dropped + 1
              break
            end
            hand = nil  -- (served: its token back in its list, kept by its group or gone)
            -- the task served is leased first: it has left its group (its token gone or
            -- back), and a refusal of the limiter's removals (unpark's emptied step: an
            -- ACL changed while the worker runs) before its lease lost it (lease() puts
            -- it back when its own write is refused)
            if taken then
              lease(taken, taken_body, taken_priority, taken_spec)
            else
              dropped = dropped + 1
            end
            unpark(park, limiter, true, 'emptied')
          elseif not body then
            unpark(park, limiter)
            unpark(park, limiter, false, 'emptied')
            drop(id, held)
          else
            local free, retry_at = true, -1
            if spec and spec.limiter == limiter
               and not (spec.expires > 0 and now >= spec.expires) then
              free, retry_at = flow_control().admit(prefix, spec, id, flow_clock(), KEYS[2],
                                                     KEYS[19])
            end
            if not free then
              if retry_at >= 0 then
                flow_control().put('zset', 'ZADD', KEYS[20], retry_at, limiter)
              else
                -- the outcome that frees a slot re-arms it
                flow_control().put('zset', 'ZREM', KEYS[20], limiter)
              end
              break
            end
            back, back_entry, hand = park, entry, id
            unpark(park, limiter)
            lease(id, body, priority, spec)
            hand = nil  -- (leased, or dropped as held already)
            unpark(park, limiter, false, 'emptied')
          end
        end
      end
    end
    local served, failure = pcall(serve_due)
    if not served then
      local made = flow_made and flow_made.fair_made
      if hand and not (made and made.placed == hand) then
        put_back(back, {back_entry})
        -- (a token: its mark in cancelled, made as it was taken, goes with it)
        if string.byte(hand) == 255 then redis.pcall('ZREM', KEYS[17], hand) end
      end
      -- the groups served before the refusal flushed (the fair library's removals of
      -- those it emptied: below, as after serve_lists)
      if made then pcall(made.flush) end
      error(failure, 0)
    end
  end
end

-- The lists above the default priority (5, KEYS[11]) are skipped with one EXISTS
-- (serve_lists() asks it first) when all are empty, and so are those below it once
-- KEYS[11] is: one call in place of an LPOP per list. Nothing this fetch does from
-- here on adds to a ready list but a group's token (fair queues), put back into the
-- list of its group's first task: one passed already is left for the next fetch (a
-- wake token says so), so a list found empty stays empty for this one; a key of
-- another type counts as one that exists, and its LPOP treats it as empty, as before.
-- ahead: ids popped ahead from KEYS[band] by one LPOP with a count (more than one
-- wanted: one call in place of one per id), served in turn from ahead[ahead_at + 1];
-- bounded as the loop is (limit). Before the fair library writes to a ready list (a
-- grouped task joining its group; a group's token served: where serve() writes, but
-- for its token's push to the tail of a list, after the ids anyway), the ids after
-- the entry go back to the head of their list, in their order: its handling meets
-- the lists as popping one id at a time would have left them. A plain task, a stale
-- entry, a task parked or admitted by its limits (park lists, flow keys) and a solo
-- group's token served on the fast path (reads only) need none of that.
-- unpop(): those ids back at the head of their list, in their order (none left:
-- nothing); made at the first pop of several (a closure costs a call about 1,000
-- instructions)
-- alone: the last pop took the one entry its list held (an LPOP with a count that
-- found no other)
local ahead, ahead_at = nil, 0
-- The ready lists served, under pcall: Redis keeps what a script wrote before an
-- error (no rollback), so a refusal part way (an ACL changed while the worker runs:
-- NOPERM, from any command after the pops) puts back what the loop popped and had not
-- handled, below. What the loop only reads comes as arguments, and what it changes
-- that the call reads after it (parked_change, fair_served) goes back as its results:
-- each upvalue a closure takes costs a call some 400 Redis instructions (this one,
-- with them all, cost a fetch 14,000 more). Its upvalues: what the refusal puts back
-- (hand, ahead, band, solo_flush) and what other closures change
-- (dropped, flow_made)
local solo_flush  -- (the fast path's, below: a refusal part way calls it too)
local function serve_lists(guards, tolerant, ENTRY_MOST, overlong_dropped, flow_control,
                           want, limit, flow_on, prefix, flow_clock, park_token, fair, drop,
                           lease, body_of, numbers, now, parked_change, fair_served)
  local unpop, alone = nil, false
  -- fair queues' fast path (the main loop below): solo_n, the tokens it served this
  -- fetch, each to remove (its group's field of groups_solo: flow.lua), by solo_flush()
  -- once a fetch; the first's group in solo_group (no table: a fetch of one, a
  -- process-pool child's, makes none), the others' in solo_names, and their groups in
  -- solo_seen (group -> true), made at the second. any_paused: the EXISTS of the paused
  -- groups, read once
  local solo_n, solo_group, solo_seen, solo_names, any_paused = 0, nil, nil, nil
  -- (in the loop's pcall: a refusal of it after the due loop served groups flushes them)
  if #numbers < want * 2 and dropped < limit
     and redis.call('EXISTS', KEYS[7], KEYS[8], KEYS[9], KEYS[10]) == 0 then
    band = 11
  end
  while #numbers < want * 2 and band <= 16 and dropped < limit do
    hand = nil  -- (the last entry is handled: nothing in hand before this pop)
    local id
    if ahead then
      ahead_at = ahead_at + 1  -- (alone: false since that pop)
      id = ahead[ahead_at]
      if ahead_at == #ahead then ahead = nil end
    else
      -- the count as ARGV carries it when it is all that is wanted (Redis formats a
      -- number with snprintf)
      local count = want - #numbers / 2
      if count > limit - dropped then count = limit - dropped end
      if count < 2 then
        count = nil
      elseif count == want then
        count = ARGV[3]
      elseif count < 3 then
        count = nil  -- a number formatted costs what an LPOP more does
      end
      if count then
        id = redis.pcall('LPOP', KEYS[band], count)
        if type(id) == 'table' then
          if id.err then
            guards().foreign(id)  -- a ready list of another type
            id = false
          else
            alone = #id == 1
            if not alone then
              ahead, ahead_at = id, 1
              unpop = unpop or function()
                if not ahead then return end
                local rest = {}
                for i = #ahead, ahead_at + 1, -1 do rest[#rest + 1] = ahead[i] end
                redis.call('LPUSH', KEYS[band], unpack(rest))
                ahead = nil
              end
            end
            id = id[1]
          end
        end
      else
        id, alone = redis.pcall('LPOP', KEYS[band]), false
        if type(id) == 'table' then guards().foreign(id) id = false end  -- of another type
      end
    end
    hand = id  -- (false: none; popped ahead or now, it is in hand until handled)
    if id and #id > ENTRY_MOST then  -- no entry of ours (promote.lua): popped, dropped once
      tolerant(0, 'ZREM', KEYS[17], id)  -- (and its cancelled mark, planted with it)
      overlong_dropped(KEYS[band], #id)
      dropped = dropped + 1
      id = false
    elseif not id then
      band = band + 1
      if band == 12
         and redis.call('EXISTS', KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16]) == 0 then
        band = 17
      end
    else
      -- a solo group's token (the fast path below) told by one match, body_of() not
      -- asked: only under flow control (a grouped task has a spec; without any, the
      -- fast path would leave every token to serve()), where a plain id pays the match
      -- failing at its first byte. The captures: the token's generation, its separator
      -- (':' when its task's spec is plain: below), its task's priority digit and id
      -- (printable ASCII, as body_of() asks of an id), its group
      local body, token, held, gen, sep, digit, task, group
      if not flow_on then
        body, token, held = body_of(id)
      else
        if not (flow_made and flow_made.fair_made) then
          gen, sep, digit, task, group =
            string.match(id, '^\255([^\255/:]*([/:])([0-9])([ -~]*))\255(.+)$')
        end
        if gen then body, token = false, true else body, token, held = body_of(id) end
      end
      local priority = 16 - band
      local spec = flow_on and body
                   and flow_control().spec(tolerant(false, 'HGET', KEYS[19], id), id, KEYS[19])
      if not body then
        -- Fair queues' fast path: the token of a solo group of a plain task (flow.lua: its
        -- one task held in the token, its claim, ':', in groups_solo only; 100,000 groups
        -- of one task each), leased here without flow.lua's library (made, it costs a
        -- call some 40,000 Redis instructions): its claim read (one HGET), its task's
        -- message (no spec: a ':' claim is written with a plain spec only, in the same
        -- step, and a waiting task's spec is not written again), as flow.lua's serve()
        -- does, its claim removed by solo_flush() once a fetch. Anything else (a claim
        -- that is not this token, a '/' claim, a group paused, a task gone, a group met
        -- twice) leaves it, having written nothing, to serve(), which serves every token
        -- once fair() is made in the call (their removals never cross). Inline: a
        -- closure would cost every fetch
        local taken, taken_body, taken_priority
        repeat
          -- (gen: '\255' .. generation .. '\255' .. group matched above, the generation a
          -- solo group's: '<now>.<count>:' (or '/'), a priority digit, the task's id; one
          -- match in place of eight string calls, some 800 Redis instructions each. A
          -- token it does not fit goes to serve())
          if not gen or sep ~= ':' or group == solo_group or (solo_seen and solo_seen[group]) then
            break
          end
          if any_paused == nil then any_paused = redis.pcall('EXISTS', prefix .. 'groups_paused') end
          if any_paused ~= 0 then break end  -- (an error: not 0)
          -- the claim names this token (a string compared by address; an error, a table,
          -- or none, false, never equal)
          if redis.pcall('HGET', prefix .. 'groups_solo', group) ~= gen then break end
          -- and the group has no turn (a solo group has none: a claim left in groups_solo
          -- of a group in its set form, planted again after it was lifted, would lease
          -- its first task here while its set and turn keep it, stranding the group):
          -- serve() reads the turn first. One HLEN: a turn of another type (an error
          -- reply), which serve() cannot read, leaves the task served here
          local fields = redis.pcall('HLEN', prefix .. 'g:' .. group .. ':turn')
          if fields ~= 0 and type(fields) == 'number' then break end
          local task_body = body_of(task, true)
          if not task_body then break end
          taken, taken_body, taken_priority = task, task_body, string.byte(digit) - 48
          solo_n = solo_n + 1
          if solo_n == 1 then
            solo_group = group
            solo_flush = solo_flush or function(refused, keep)
              -- (redis.pcall, lib.lua's guards().foreign() only for an error: tolerant()
              -- is a vararg call, some 1,000 instructions more)
              local gone
              if refused then
                -- a refusal part way (below): the tokens served are gone, and their
                -- claims with them, but for the group of the token in hand (`keep`:
                -- its task's lease refused, it goes back with its claim)
                keep = keep and string.match(keep, '^\255[^\255]*\255(.+)$')
                local names = {}
                for i = 0, solo_n - 1 do
                  local name = i == 0 and solo_group or solo_names[i]
                  if name ~= keep then names[#names + 1] = name end
                end
                if names[1] then redis.pcall('HDEL', prefix .. 'groups_solo', unpack(names)) end
                solo_n = 0
                return
              end
              if solo_n == 1 then
                gone = redis.pcall('HDEL', prefix .. 'groups_solo', solo_group)
              else
                gone = redis.pcall('HDEL', prefix .. 'groups_solo', solo_group, unpack(solo_names))
              end
              if type(gone) == 'table' then guards().foreign(gone) end
              solo_n, solo_group, solo_seen, solo_names = 0, nil, nil, nil
            end
          else
            if solo_n == 2 then
              -- (a list made at a worker's default prefetch, 10, less the first: a table's
              -- growth is a rehash)
              solo_seen = {}
              solo_names = {nil, nil, nil, nil, nil, nil, nil, nil, nil}
            end
            solo_seen[group] = true
            solo_names[solo_n - 1] = group
          end
        until true
        if taken then
          lease(taken, taken_body, taken_priority, nil)
        elseif token then
          -- a group's token (flow.lua's fair queues): its first task, as its limits allow
          -- (the ids popped ahead of their turn go back first where serve() writes to a
          -- ready list, but for the token's push to the tail: they stay before it)
          -- (in hand, none placed yet: a refusal puts it back, once)
          if flow_made and flow_made.fair_made then flow_made.fair_made.placed = false end
          if solo_n > 0 then solo_flush() end  -- the fast path's removals first
          -- again: serve() kept the token in hand (it would have been the next pop: back
          -- at the head of this list, or alone in it): served again in place of a pop,
          -- and released (pushed back) when the fetch has all it wants; the ids popped
          -- ahead go back before it (it goes to the head for its turn's next fetch)
          fair_served = fair()
          local taken_spec, again
          -- (the token is in hand until serve() has put it somewhere: pushed back, kept,
          -- its group gone; one its limits hold, until it is parked)
          repeat
            hand = id
            taken, taken_body, taken_priority, taken_spec, again =
              fair_served.serve(id, limit - dropped, priority, want - #numbers / 2 - 1, alone,
                                ahead and unpop)
            hand = nil
            if taken then
              lease(taken, taken_body, taken_priority, taken_spec)
            else
              dropped = dropped + 1
              -- held by its task's own limits: it waits in their park list
              if taken_body then
                hand = id
                park_token(id, priority, taken_body, false)
                hand = nil
              end
            end
          until not again or #numbers >= want * 2 or dropped >= limit
          if again then
            if ahead then unpop() end
            fair_served.serve(false)  -- the token kept in hand goes back
          end
        else
          drop(id, held)
        end
      elseif spec and (spec.group or spec.limiter ~= '')
             and not (spec.expires > 0 and now >= spec.expires) then
        -- (one branch: a task without a spec is tested once, as before)
        if spec.group then
          -- a grouped task on its way back (due, put back, re-delivered) joins its group
          if ahead then unpop() end  -- the ids popped ahead of their turn go back first
          if solo_n > 0 then solo_flush() end  -- the fast path's removals first
          fair().join(id, spec, priority)
          hand = nil  -- (in its group's set)
          dropped = dropped + 1
        else
          -- behind tasks parked already (their order kept), or over its limit: parked
          local park = prefix .. spec.limiter .. ':park'
          local free, retry_at = tolerant(0, 'LLEN', park) == 0, -1
          if free then
            free, retry_at = flow_control().admit(prefix, spec, id, flow_clock(), KEYS[2],
                                                     KEYS[19])
          end
          local held = not free and tolerant(false, 'RPUSH', park, priority .. id)
          if free then
            lease(id, body, priority, spec)
          elseif type(held) ~= 'number' then
            lease(id, body, priority, spec)  -- a park list of another type: no limit kept
          else
            hand = nil  -- (in its limiter's park list)
            parked_change = parked_change + 1
            if held == 1 then flow_control().put('set', 'SADD', KEYS[22], spec.limiter) end
            if retry_at >= 0 then
              flow_control().put('zset', 'ZADD', KEYS[20], 'LT', retry_at, spec.limiter)
            else
              -- parked behind others, or for a slot: a limiter no outcome is due to re-arm
              -- (its holders gone) is looked at by the next fetch
              flow_control().put('zset', 'ZADD', KEYS[20], 'NX', flow_clock(), spec.limiter)
            end
            dropped = dropped + 1
          end
        end
      else
        lease(id, body, priority, spec)
      end
    end
  end
  hand = nil  -- (the last entry is handled)
  if ahead then unpop() end  -- (never: each id popped ahead is served before the loop ends)
  if solo_n > 0 then solo_flush() end  -- the fast path's removals
  return parked_change, fair_served
end
local served, failure, served_fair = pcall(
  serve_lists, guards, tolerant, ENTRY_MOST, overlong_dropped, flow_control, want, limit,
  flow_on, prefix, flow_clock, park_token, fair, drop, lease, body_of, numbers, now,
  parked_change, fair_served)
if served then
  parked_change, fair_served = failure, served_fair
else
  -- the fast path's tokens served before the refusal (their tasks leased, or dropped
  -- as held already) lose their claims, as at the end of the loop
  if solo_flush then pcall(solo_flush, true, hand) end
  -- Every entry popped and not yet leased, parked or served goes back where it was,
  -- in its order: the entry in hand (an id, or a solo group's token whose task's
  -- lease was refused: the token, which holds the task and its group's claim), then
  -- the ids popped ahead of their turn, at the head of their list; a token serve()
  -- kept in hand goes back as serve(false) puts it, after them (as at the end of its
  -- run). One popped and leased stays leased: its lease expires, and it is delivered
  -- again. Then the fair library's flush(), as after the loop: a group emptied by a
  -- serve before the refusal has its turn and its token's mark removed (kept, its
  -- turn claimed a token that was gone, and its task, back, waited behind it for
  -- ever); the entry in hand put back keeps its mark. (pcall: a refusal of these too
  -- must not hide the first)
  local made = flow_made and flow_made.fair_made
  -- (a token serve() or park_token() put in a list already is not put back again)
  if hand and made and made.placed == hand then hand = nil end
  local back = {hand or nil}
  if ahead then
    for i = ahead_at + 1, #ahead do back[#back + 1] = ahead[i] end
    ahead = nil
  end
  put_back(KEYS[band], back)
  -- (a token serve() keeps in hand: its push refused, it goes back as put_back() puts it)
  if made and not pcall(made.serve, false) then put_back(KEYS[band], {made.releasing}) end
  if made then pcall(made.flush, hand) end
  error(failure, 0)
end
-- The groups' state it owes (the turns of the groups it emptied, their counts), written
-- first: what follows writes hints and counts only, and a refusal there (an ACL changed
-- while the worker runs) loses the reply, whose leases expire and are delivered again;
-- without these writes, the turn of a group emptied would claim a token that is gone,
-- and its task, back, would wait behind it for ever (probe29s H1)
if fair_served then fair_served.flush() end
if band > 16 then
  -- every ready list is empty: stale wake tokens would only cost empty fetches. A
  -- group's token put back into a list passed already is work: a worker is woken
  if flow_made and flow_made.fair_made and flow_made.fair_made.pushed then
    flow_control().put('list', 'RPUSH', KEYS[5], '1')  -- (of another type: moved aside)
  else
    redis.pcall('DEL', KEYS[5])  -- (a hint: refused, a worker wakes by its own clock)
  end
end

-- the next event (see the header), as text
local next_event
if (dropped >= limit and #numbers == 0) or #numbers >= want * 2 then
  -- a long run of stale entries (a mass cancel) is cleared a batch per call, so no
  -- call blocks Redis for long: the caller fetches again at once. And when every task
  -- asked for was leased, the caller runs them and fetches again before it waits, so
  -- the next event is not read (two ZRANGEs saved). `now` says "look again" to both.
  next_event = now_text
else
  local at = -1
  -- the earliest due time and lease deadline; a score that is not finite counts for
  -- neither, a negative one stands for 0 (due long ago)
  local first_due = first_delayed[2]  -- (delayed of another type: none)
  if batch then first_due = redis.call('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')[2] end
  local score = tonumber(first_due)
  if score and score > -math.huge and score <= MAX_SCORE then
    at = math.max(0, math.floor(score / 10))
  end
  local first_lease = redis.call('ZRANGE', KEYS[2], '0', '0', 'WITHSCORES')
  if first_lease[1] and #first_lease[1] > ID_MOST then  -- no id of ours (promote.lua)
    redis.call('ZREM', KEYS[2], first_lease[1])
    overlong_dropped(KEYS[2], #first_lease[1])
  end
  score = tonumber(first_lease[2])
  if score and score > -math.huge and score <= MAX_SCORE then
    local lease_end = math.max(0, math.floor(score / 10))
    if at < 0 or lease_end < at then at = lease_end end
  end
  -- A lease dated further ahead than any minitask writes is reclaimed as an expired
  -- one. A worker takes a lease for its visibility_timeout from its now, and renews
  -- it for as long; each worker says, as it starts, how long that is in the queue's
  -- lease_longest (ZADD GT: the longest of any worker's). A lease further ahead than
  -- now plus that longest and as long again, an hour at least (a clock ahead), is no
  -- lease a worker holds: a planted or corrupt one (the year 2096, inf) would hold
  -- its task, and the max_running or group_max_running slot it took, for ever after
  -- its worker died. Looked for here, by a fetch that leased less than it asked for
  -- (an idle queue, or one whose tasks such a slot holds back): one ZRANGE of the
  -- latest lease (a command more on every fetch would cost it 10 %), and the longest
  -- read only when that lease is past this fetch's own lease length's bound (with
  -- none said, this fetch's own is the longest; with one that cannot be read, a key
  -- of another type, no lease is taken for foreign). At most ARGV[5] of
  -- them are made due long ago (their band kept: a score of 0 to 9), said in Redis's
  -- log, and the caller fetches again at once: that fetch reclaims them as it
  -- reclaims any expired lease.
  local last_lease = redis.call('ZRANGE', KEYS[2], '-1', '-1', 'WITHSCORES')
  if last_lease[1] and #last_lease[1] > ID_MOST then  -- no id of ours (promote.lua)
    redis.call('ZREM', KEYS[2], last_lease[1])
    overlong_dropped(KEYS[2], #last_lease[1])
    last_lease = {}
  end
  local latest = tonumber(last_lease[2])
  local own = tonumber(ARGV[2])
  local bound = latest and (tonumber(deadline) + math.max(own, 3600000)) * 10 + 9
  if latest and latest > bound then
    -- (derived from the leases key, under the same hash tag: 'leases' is its end)
    local said = redis.pcall('ZSCORE', string.sub(KEYS[2], 1, -7) .. 'lease_longest', 'ms')
    local longest = type(said) == 'string' and tonumber(said)
    if said and not (longest and longest < math.huge) then
      bound = math.huge
    elseif longest and longest > own then
      bound = (tonumber(deadline) - own + longest + math.max(longest, 3600000)) * 10 + 9
    end
  end
  if latest and latest > bound then
    local ahead = redis.call('ZRANGEBYSCORE', KEYS[2], string.format('(%.0f', bound), '+inf',
                             'WITHSCORES', 'LIMIT', '0', ARGV[5])
    for i = 1, #ahead, 2 do
      redis.call('ZADD', KEYS[2], 'XX', guards().band_of(ahead[i + 1], 0), ahead[i])
    end
    redis.log(redis.LOG_WARNING, 'minitask: ' .. (#ahead / 2) .. ' lease(s) of ' .. KEYS[2]
              .. ' dated further ahead than any worker takes one for (the latest: '
              .. string.sub(tostring(latest), 1, 32) .. '): not minitask\'s; made due, to be'
              .. ' reclaimed as expired')
    at = 0
  end
  if flow_on then
    score = tonumber(tolerant({}, 'ZRANGE', KEYS[20], '0', '0', 'WITHSCORES')[2])
    if score and score > -math.huge and score <= MAX_SCORE then
      local frees = math.max(0, math.floor(score))
      if at < 0 or frees < at then at = frees end
    end
  end
  next_event = at < 0 and '-1' or string.format('%.0f', at)
end

-- the reply (see the header), inline: a closure costs every call
if parked_change ~= 0 then
  -- a count that is no integer starts afresh (lib.lua's recount); a key of another
  -- type is moved aside (lib.lua's aside()) and the count starts afresh. At 0 (or
  -- below: not minitask's) it goes: an idle queue leaves nothing behind
  -- (refused, an ACL changed while the worker runs: the count, for status only, is
  -- left as it was, and the tasks leased reach their worker; each version words a
  -- refusal inside a script its own way: lib.lua's refused)
  local total = redis.pcall('INCRBY', KEYS[23], parked_change)
  if type(total) == 'table' and guards().refused(total) then
    total = 1
  elseif type(total) == 'table' then
    total = guards().recount(total, KEYS[23], parked_change)
    if not total then
      guards().aside(KEYS[23], guards().held_other('string'))
      total = redis.call('INCRBY', KEYS[23], parked_change)
    end
  end
  if total <= 0 then redis.pcall('DEL', KEYS[23]) end  -- (refused: left, as above)
end
-- counts of 0 as literals: Redis formats a Lua number with snprintf
local poisoned_count, expired_count = '0', '0'
if poisoned then
  for _, id in ipairs(poisoned) do reply[#reply + 1] = id end
  poisoned_count = #poisoned
end
if expired then
  for i = 1, #expired, 2 do
    reply[#reply + 1] = expired[i]
    numbers[#numbers + 1] = expired[i + 1]
  end
  expired_count = #expired / 2
end
-- entries dropped as longer than any minitask writes (promote.lua's OVERLONG), after
-- all the reply's head counts: the worker says each in its log
if OVERLONG then reply[#reply + 1] = table.concat(OVERLONG, '\n') end
-- (one task's two numbers joined in the one concatenation: no table.concat)
local flow_word = flow_on and (slots and ' 1 ' or ' 2 ') or ' 0 '
if #numbers == 2 then
  reply[1] = next_event .. flow_word .. poisoned_count .. ' ' .. expired_count .. ' ' .. numbers[1]
             .. ' ' .. numbers[2]
else
  reply[1] = next_event .. flow_word .. poisoned_count .. ' ' .. expired_count .. ' '
             .. table.concat(numbers, ' ')
end
return reply

