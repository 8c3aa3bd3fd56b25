-- flow: flow control (docs/guide/flow-control.rst), a library put in front of
-- the scripts that hand tasks out or end them (stores/scripts.py). A task with
-- limits or an expiry has a spec in the queue's flow hash (id -> spec; limits.py
-- packs it), text lines:
--   limiter, rate count, rate window (ms), max running, expires (ms; 0: never),
--   debounce (0 or 1)
-- The limiter (empty: no limits) names one task and limit key; its state lives
-- under the queue's hash tag, at names built from the flow prefix (keys.py):
--   <prefix><limiter>:park     LIST  parked entries (priority digit .. id), oldest first;
--                                    or a group's token its task's limits hold
--                                    (fair queues: flow_held_by_task)
--   <prefix><limiter>:starts   ZSET  'ms:id' -> start (ms) within the last window
--                                    (the member names when it came, the score
--                                    when it counts from), and '' -> the pace:
--                                    when the next start is due
--   <prefix><limiter>:running  SET   ids leased now, each holding a max_running slot
--   <prefix><limiter>:pace     STRING a rate of PACED_FROM or more starts a window:
--                                    when its next start is due (ms, fractional)
-- flow_due (ZSET) holds limiter -> when its parked tasks may be tried again (ms);
-- a limiter waiting for a max_running slot has no entry until a slot frees.
-- Rates: at most `count` starts in any window a guard longer than `window` (4 %,
-- 250 ms at most: it covers the hand-over between the fetch and the task's first
-- line on a busy machine, so that starts counted in the task keep the limit too),
-- paced one every window / count, none before its turn. So that a worker waking late
-- does not slow the rate down: a start up to half a pace (1 ms at least) after its
-- turn sets the next turn from its own, and is logged from when it was due, by half
-- the guard at most (late wake-ups would otherwise add up, window after window);
-- starts stay at least a window and half the guard apart.
-- A rate of PACED_FROM or more starts a window keeps no log (it would hold up to
-- `count` entries, and cost a sorted-set write per start): it is paced alone, one
-- start every (span + tolerance) / (count - 1), span being the window and its guard,
-- a start allowed up to the tolerance (half the guard) before its turn. Then n starts
-- in any span satisfy (n - 1) * pace - tolerance <= span, so n <= count: the same
-- strict bound, at count - 1 starts a span and a half guard, 94 % of a per-second
-- rate or more.
-- Data minitask did not write (lib.lua): a spec that does not parse, or holds a number
-- beyond those minitask writes (flow_spec), is no limit (a fetch says so in Redis's log); a
-- limiter key of another type counts as empty, and writes to it are skipped; a pace
-- further out than a start ever sets it (a gap and a span past now) is ignored,
-- with a line in Redis's log. Fair queues: a group's ready member that names no
-- priority (no digit first) is taken as an id at priority 0 (said once a call in
-- Redis's log), so a token only ever goes to a ready list; one longer than any
-- minitask writes is removed by its rank where first read (flow_fair's shortened); a
-- score that is no order minitask writes only orders it; a turn's claim of a
-- live token that is no generation and priority minitask writes, or names a token in
-- no ready list (checked where the group would otherwise stay out), is repaired by
-- a new token; a gen, or groups_ready, that is no count starts afresh. A key a
-- grouped task or its group's token is written to (its group's ready set, turn or
-- slots, a ready list, a park list) that holds another type is moved aside whole
-- (flow_quarantine): the task is never dropped, nor a call failed half-way. A full
-- running set (a limiter's, a group's) is checked a page at a time, whatever its
-- size: a member that holds no slot (a planted id, a task gone; a limiter's: no
-- lease; a group's: not leased, waiting for its retry, in its group's ready set nor
-- on its way there), or whose spec no longer names that limiter or group with a slot
-- (lost, deleted, overwritten: its outcome would free none, and what waits for it
-- would wait for good), is freed (flow_limits' vacate).

-- The library is made by flow_control() at its first call, as one table: a
-- closure costs Redis about 1,000 instructions a call of a script, made and
-- collected whether it is called or not, and most queues have no flow control
-- (lib.lua's guards() likewise). Scripts call flow_control().spec(...), .admit(...)
-- and .finish(...).
local flow_made

local function flow_control()
  if flow_made then return flow_made end

  -- redis.call of the write `command` on `key`, where minitask keeps a `kind`: a key
  -- of another type is moved aside (lib.lua's guards().displaced: to `key`:foreign)
  -- and the write made again, on the missing key; never skipped nor refused for it
  -- (a flow_due of another type would leave a limited group queued for ever). One
  -- redis.pcall until such a key is met. Scripts call it as flow_control().put.
  local function flow_put(kind, command, key, ...)
    local reply = redis.pcall(command, key, ...)
    if type(reply) == 'table' and reply.err then
      guards().displaced(reply, key, kind)
      reply = redis.call(command, key, ...)
    end
    return reply
  end

  -- A field of a spec as a number: most are 0, told without a tonumber (which costs
  -- Redis about 1,500 instructions)
  local function flow_number(text)
    if text == '0' then return 0 end
    return tonumber(text)
  end

  -- The most a spec's numbers are where minitask writes them (limits.py: MAX_COUNT
  -- starts or slots, a window of an hour, an expiry of MAX_MS; checked against it by
  -- tests/unit/test_flow_spec_bounds.py). A number beyond them (99999999999999999999,
  -- 400 digits: inf) is not minitask's, and would reach a command whose range it
  -- passes (a PEXPIRE, a SET PX) after the fetch has taken the task: the spec, or its
  -- group's part, cannot be read (flow_spec).
  local FLOW_MOST, FLOW_WINDOW, FLOW_EXPIRES = 1000000, 3600000, 253402300799999

  -- What an outcome reads of a task's spec to free the slots it holds (flow_end), and
  -- so what a full set's check reads of its holders' (vacate): the limiter of a spec
  -- whose max_running is above 0, and the group of one whose group_max_running is.
  local HOLDS_LIMITER = '^([^\n]+)\n%d+\n%d+\n[1-9]'
  local HOLDS_GROUP = '^[^\n]*\n%d+\n%d+\n%d+\n%d+\n%d\n[1-9]%d*\n%d+\n%d+\n(.+)$'

  -- A spec as a table, or nil when it does not parse or holds a number beyond those
  -- minitask writes (no limit, no expiry, no group); a grouped spec whose group's part
  -- cannot be read is read without it (its own limits still hold). With `id` and the
  -- flow hash `key` (a fetch's read), a spec or group's part that cannot be read is
  -- said in Redis's log, naming them and the problem (flow_limits' unreadable).
  local function flow_spec(text, id, key)
    if type(text) ~= 'string' then return nil end
    local limiter, count, window, most, expires, rest = string.match(
      text, '^([^\n]*)\n(%d+)\n(%d+)\n(%d+)\n(%d+)\n()')
    local spec = limiter and {limiter = limiter, count = flow_number(count),
                              window = flow_number(window), most = flow_number(most),
                              expires = flow_number(expires)}
    if spec and not (spec.count <= FLOW_MOST and spec.window <= FLOW_WINDOW
                     and spec.most <= FLOW_MOST and spec.expires <= FLOW_EXPIRES) then
      spec = nil
    end
    -- a grouped task's spec goes on past its debounce (fair queues, below)
    if spec and rest < #text then
      local group_most, group_count, group_window, group = string.match(
        text, '^[^\n]*\n%d+\n%d+\n%d+\n%d+\n%d\n(%d+)\n(%d+)\n(%d+)\n(.+)$')
      if group then
        group_most, group_count = flow_number(group_most), flow_number(group_count)
        group_window = flow_number(group_window)
        if group_most <= FLOW_MOST and group_count <= FLOW_MOST
           and group_window <= FLOW_WINDOW then
          spec.group, spec.group_most = group, group_most
          spec.group_count, spec.group_window = group_count, group_window
          return spec
        end
      end
    elseif spec then
      return spec
    end
    if id then
      redis.log(redis.LOG_WARNING, flow_made.unreadable(text, id, key, spec
        and 'the task runs without its group, as an ungrouped task with its own limits'
        or 'the task runs without limits, expiry or group (those it cannot read)'))
    end
    return spec
  end

  -- Free the max_running slot `id` holds under `limiter`, if any, and have the
  -- limiter's parked tasks tried at once (a wake token rouses a waiting worker).
  -- Tried whether or not the set held `id`: a set moved aside (another type), deleted
  -- or emptied by another hand no longer holds it, and a limiter waiting for a slot
  -- has no other way back (no flow_due entry). The fetch's admission still counts
  -- the slots (and frees those held by no lease), so a try too many costs one check.
  local function flow_free(prefix, due, wake, limiter, id)
    flow_put('set', 'SREM', prefix .. limiter .. ':running', id)
    if tolerant(0, 'LLEN', prefix .. limiter .. ':park') > 0 then
      flow_put('zset', 'ZADD', due, 0, limiter)
      flow_put('list', 'RPUSH', wake, '1')
    end
  end

  -- flow_free for each of `ids` that has a spec; `forget`: drop their specs too (the
  -- task has ended), and free the group_max_running slots they hold (a retried, put
  -- back or re-delivered task keeps its slot: its group's order holds across them).
  -- One HMGET when none of them has a spec.
  local function flow_end(flow, prefix, due, wake, ids, forget)
    local specs, found = tolerant({}, 'HMGET', flow, unpack(ids)), false
    for i, id in ipairs(ids) do
      if specs[i] then found = true end
      -- a spec of no limiter and no group_max_running (a grouped task without limits)
      -- starts with these 13 bytes: told by one plain find, not by the two patterns
      -- below (about 3,400 Redis instructions a task)
      if specs[i] and string.find(specs[i], '\n0\n0\n0\n0\n0\n0\n', 1, true) ~= 1 then
        -- the limiter of a spec whose max_running is above 0 (written without a
        -- leading zero): all an outcome needs, read without parsing the whole spec
        -- (one capture, no numbers: a fifth of the instructions of a whole parse)
        local limiter = string.match(specs[i], HOLDS_LIMITER)
        if limiter then flow_free(prefix, due, wake, limiter, id) end
        -- a grouped task with a group_max_running: its group is tried again at once
        -- (its ready tasks, if any, come back into the rotation: flow_fair's arm),
        -- whether or not its running set held `id` (as flow_free, above)
        local group = forget and string.match(specs[i], HOLDS_GROUP)
        if group then
          flow_put('set', 'SREM', prefix .. 'g:' .. group .. ':running', id)
          if tolerant(0, 'ZCARD', prefix .. 'g:' .. group .. ':ready') > 0 then
            flow_put('zset', 'ZADD', due, 0, 'g:' .. group)
            flow_put('list', 'RPUSH', wake, '1')
          end
        end
      end
    end
    if forget and found then flow_put('hash', 'HDEL', flow, unpack(ids)) end
  end

  -- Fair queues (docs/guide/fair-queues.rst): a grouped task's spec goes on past
  -- its debounce with four lines: group_max_running, group rate count, group rate
  -- window (ms), the group (any text, last). A group's state lives at names built
  -- from the flow prefix (keys.py), under the queue's hash tag:
  --   <prefix>g:<group>:ready    ZSET  its ready tasks, each its priority's digit and its
  --                                    id ('5' .. id) -> (9 - priority) * RANK + order
  --                                    (a group_max_running slot holder: (9 - priority)
  --                                    - 10, before them all)
  --                                    (read without scores: a score costs Redis a
  --                                    number formatted, a tonumber() to read)
  --   <prefix>g:<group>:turn     HASH  tok: the generation of its live token (its claim),
  --                                    band: the priority of the ready list that token is
  --                                    in, served: fetches this turn, gen: a counter (token
  --                                    generations and the order of joins)
  --   <prefix>g:<group>:running  SET   ids holding a group_max_running slot
  --   <prefix>g:<group>:starts / :pace  its rate (flow_admit's, limiter 'g:<group>')
  --   <prefix>groups         ZSET  group -> ready tasks, for each group with any
  --   <prefix>groups_ready   STRING the grouped ready tasks of the queue in ready sets or
  --                                    '/' claims (gone at 0)
  --   <prefix>groups_solo    HASH  group -> its ':' claim, for each solo group of a plain
  --                                    task (below)
  --   <prefix>groups_paused  SET   paused groups     <prefix>groups_weight  HASH weights
  --   <prefix>groups_weight_said  HASH  group -> when a weight not minitask's was last
  --                                    said in Redis's log, and the calls since (weight_of)
  -- and flow_due holds 'g:<group>' -> when the group may come back into the rotation
  -- (a rate), or 0 (a slot freed, a resume).
  -- The rotation is the queue's own ready lists: a group with eligible work has one
  -- live token there, "\255" .. generation .. "\255" .. group (never an id: no id
  -- holds the byte 255, not UTF-8), in the list of its highest priority. A fetch that
  -- pops a live token leases the group's first task and puts the token back: at the
  -- head while the group has had fewer fetches this turn than its weight, else at
  -- the tail. So groups take turns with each other and with ungrouped tasks, at O(1)
  -- a fetch whatever their number. A token whose generation is not the group's is
  -- stale (a higher priority gave the group a new one) and is dropped. A paused group,
  -- one at its group_max_running or over its rate leaves the rotation (its token is
  -- dropped) and comes back through flow_due when a slot frees, its rate allows or
  -- it is resumed: no polling, and it holds no other group back. A token is in the
  -- queue's cancelled set while it is in a ready list, so counts leave it out.
  -- A solo group (a task sent to a group with neither a ready set nor a turn nor a
  -- groups_solo entry) keeps its one task in its token instead of a ready set: the
  -- generation is then '<now>.<count>/' .. the task's member, and the claim the same.
  -- For a task whose spec holds no limit, expiry or group limit (lib.lua's
  -- PLAIN_SOLO_CLAIM) it is '<now>.1:' .. the member, and the claim is kept in the
  -- queue's groups_solo hash only: no turn, no groups entry, no cancelled entry, and
  -- not in groups_ready (its token in its ready list counts it as a ready task), so
  -- that a fetch of it (fetch.lua's fast path: no spec read) removes one hash field.
  -- A fetch popping such a live token leases the task straight away, and the group is
  -- gone. A second task joining it, or the group leaving the rotation (paused, at its
  -- limits), first puts the task in the ready set (at the token's count: its order of
  -- joining) and marks the claim '+' .. generation in the turn (a ':' claim leaves
  -- groups_solo for the turn, and its task and token are counted as a set's: lift()):
  -- the same token, still live, of a group in its set form (its place kept).
  -- Invariant: a grouped ready task is in its group's ready set only (not in a ready
  -- list), or its solo group's live claim, or in a ready list on its way back
  -- (promoted when due, put back, its lease expired), which it leaves for its group's
  -- set when a fetch pops it. A group's keys are gone once it has no ready task and
  -- none holds a slot.
  local function flow_fair(c)
    if flow_made.fair_made then return flow_made.fair_made end
    -- c: prefix (the flow prefix), first_ready (KEYS index of the priority 9 list),
    -- cancelled, now (ms as text), messages (a send's too: lift() checks a claim's
    -- task), and for a fetch: body_of, leases, flow, flow_due, clock, dead, delayed
    local RANK = 100000000000000  -- 1e14: orders below it, priorities above
    -- A ready set's member is a priority's digit and an id (promote.lua's ID_MOST, 200
    -- bytes at most): a longer one is no task of ours, removed where it is read
    -- (shortened(): a planted 50 MB member was served as an id, copied into every
    -- command and log line that named it, and blocked Redis for seconds)
    local MEMBER_MOST = 201
    -- a ':' claim's length at most: a generation (two numbers) then ':' and a member
    local CLAIM_MOST = MEMBER_MOST + 64
    local paused, weights, groups = c.prefix .. 'groups_paused', c.prefix .. 'groups_weight',
                                    c.prefix .. 'groups'
    local solos = c.prefix .. 'groups_solo'

    -- forget()'s removals are made by flush() too, one command each for all the groups
    -- a fetch empties: forgotten (group -> its turn's key) for their turns and groups entries,
    -- left for the tokens that left the ready lists (their cancelled entries). A group
    -- met again before then is settled first (its removals made at once), so that
    -- none undoes a later write.
    local forgotten, left = {}, {}
    -- The first token a call drops (it left the ready lists: leave()) has its mark
    -- removed from cancelled at once, before its serve() writes anything else: a
    -- refusal of that ZREM (an ACL changed while the worker runs) is raised with the
    -- token still in the fetch's hand, which puts it back in its list with its mark.
    -- Left to flush(), a refused removal came after the token was gone, and its mark
    -- stayed for good: status counted as many ready tasks fewer (probe29u). Once one
    -- ZREM of cancelled passed, the others of the call pass (a script runs alone: its
    -- ACL does not change), and flush() makes them in one command. early: that token,
    -- and early_band, when it had a mark, the priority of the list it was popped from
    -- (none: a park list's, whose put-back removes its mark), for flush(keep) to mark
    -- it again when a later refusal in its serve() puts it back there.
    local early, early_band
    local function leave(token, band)
      if early == nil then
        local removed = tolerant(0, 'ZREM', c.cancelled, token)
        early, early_band = token, removed == 1 and band
      else
        left[#left + 1] = token
      end
    end
    -- arming: the group arm() is putting back in the rotation, until it returns. Its
    -- caller may have dropped the group's claim already (a stale token's, a long run's):
    -- a refusal before push() made the new token (an ACL changed while the worker runs)
    -- would leave the group with ready tasks and no token, for good; flush() then makes
    -- it due (flow_due's 'g:<group>'), and the next fetch's due loop arms it again.
    local arming

    -- the grouped ready tasks: the queue's count (gone at 0) and the group's, for
    -- status (the group's entry goes with the group: forget())
    -- (a count that is no integer, 1e400 or past 2^63 starts afresh at `delta`: one
    -- minitask did not write never fails a call half-way; lib.lua's recount)
    local function tally_total(delta)
      local key = c.prefix .. 'groups_ready'
      local total = redis.pcall('INCRBY', key, delta)
      if type(total) == 'table' then total = guards().recount(total, key, delta) end
      if total and total <= 0 then redis.call('DEL', key) end
    end
    -- serve()'s tallies, written once a fetch by flush() (fetch.lua's answer): two
    -- commands saved a task. owed: the queue's count; owed_by: group -> its count
    -- (forget() drops a group's: its entry goes)
    -- asked: whether the queue's count may be lowered was asked this call (serve(): a
    -- refusal of flush()'s INCRBY, after the tasks left their sets, kept it for good)
    local owed, owed_by, asked = 0, nil, false
    -- Each of flush()'s steps is tried, the first refusal (an ACL changed while the
    -- worker runs) raised after them all: a group emptied is told gone by either its
    -- turn's DEL or its token's mark leaving cancelled (arm() looks for it), so one
    -- refused write must not skip the other (probe29s H1: a refused DEL left both, and
    -- the group's task, back, waited behind a token that was gone, for ever).
    -- first_failure(failure, pcall(...)): the first refusal of the steps tried so far
    local function first_failure(failure, ok, err)
      if ok or failure then return failure end
      return err
    end
    -- `keep`: a token that a refusal part way (fetch.lua) puts back in its list, whose
    -- mark in cancelled stays with it (its serve() may have counted it left)
    local function flush(keep)
      local failure
      if owed ~= 0 then failure = first_failure(nil, pcall(tally_total, owed)) end
      if owed_by then
        for group, delta in pairs(owed_by) do
          failure = first_failure(failure, pcall(tolerant, 0, 'ZINCRBY', groups, delta, group))
        end
      end
      if next(forgotten) then
        local turns, names = {}, {}
        for group, turn in pairs(forgotten) do
          turns[#turns + 1] = turn
          names[#names + 1] = group
        end
        failure = first_failure(failure, pcall(tolerant, 0, 'DEL', unpack(turns)))
        failure = first_failure(failure, pcall(tolerant, 0, 'ZREM', groups, unpack(names)))
        for _, group in ipairs(names) do forgotten[group] = nil end  -- (no new table made)
      end
      if arming and c.flow_due then
        failure = first_failure(failure, pcall(flow_put, 'zset', 'ZADD', c.flow_due, c.now,
                                               'g:' .. arming))
        arming = nil
      end
      if keep then
        for i = #left, 1, -1 do
          if left[i] == keep then table.remove(left, i) end
        end
        if keep == early and early_band then
          failure = first_failure(failure, pcall(flow_put, 'zset', 'ZADD', c.cancelled,
                                                 early_band, keep))
        end
      end
      if left[1] then
        failure = first_failure(failure, pcall(tolerant, 0, 'ZREM', c.cancelled, unpack(left)))
        for i = #left, 1, -1 do left[i] = nil end
      end
      owed, owed_by = 0, nil
      if failure then error(failure, 0) end
    end

    -- Whether any group is paused, any has a weight: read once a call (a script runs
    -- alone: neither changes during it), so that most serves skip the lookups
    local any_paused, any_weight
    local function is_paused(group)
      if any_paused == nil then any_paused = tolerant(0, 'EXISTS', paused) == 1 end
      return any_paused and tolerant(0, 'SISMEMBER', paused, group) == 1
    end
    -- The functions a group in its set form needs (its first tasks read, its weight),
    -- and a group met again after forget(): made by fair_set() at the first call that
    -- needs one, as one table (a fetch of solo groups' tasks makes none of them)
    local set_made
    local function fair_set()
      if not set_made then
        local function base(group) return c.prefix .. 'g:' .. group end

        -- a group forgotten (below) and met again before flush(): its removals made now
        local function settle(group)
          if forgotten[group] then
            tolerant(0, 'DEL', forgotten[group])
            forgotten[group] = nil
            tolerant(0, 'ZREM', groups, group)
          end
        end

        -- A ready set's member as its task's id and priority: 0 to 9, always (a token goes
        -- to the ready list it names). A member minitask did not write (no digit first)
        -- names none: it is the id, at priority 0, and Redis's log says so once a call.
        local function task_of(member, group)
          local digit = string.byte(member)
          if digit and digit >= 48 and digit <= 57 then
            return string.sub(member, 2), digit - 48
          end
          if not flow_made.fair_made.told then
            flow_made.fair_made.told = true
            redis.log(redis.LOG_WARNING, 'minitask: the member ' .. member .. ' of '
                      .. base(group) .. ':ready names no priority (not minitask\'s): served'
                      .. ' at priority 0')
          end
          return member, 0
        end

        -- the first ready id of a group (in its ready set: a solo group's is in its claim)
        -- and its priority, or nil; then whether there is a second and its priority; then
        -- the first's member (score order: RANK above). `ready`: the set's key, when the
        -- caller has it (ranges as text: Redis formats a Lua number with snprintf). While
        -- long members may remain ahead of its tasks (shortened()'s cap): true, at
        -- priority 0 (the group is armed: its next fetch goes on removing them).
        local function first(group, ready)
          ready = ready or base(group) .. ':ready'
          local head = tolerant({}, 'ZRANGE', ready, '0', '1')
          if not head[1] then return nil end
          if #head[1] > MEMBER_MOST or (head[2] and #head[2] > MEMBER_MOST) then
            local more
            head, more = flow_made.fair_made.shortened(ready, group, head, '1')
            if not head[1] then
              if more then return true, 0 end
              return nil
            end
          end
          local id, priority = task_of(head[1], group)
          local second_priority
          if head[2] then second_priority = select(2, task_of(head[2], group)) end
          return id, priority, head[2] ~= nil, second_priority, head[1]
        end

        -- A weight that is not minitask's, said in Redis's log at most once a minute
        -- per group, with the calls that met it since the last line: every fetch of
        -- the group meets it, and said once a call it flooded the log at the fetch
        -- rate. When it was said is kept in groups_weight_said, group -> '<ms> <calls
        -- since>', gone an hour after its last line (one of another type: said once a
        -- call, as before it was kept). `weighed`: the groups met in this call.
        local weighed = {}
        local function say_weight(group, raw)
          if weighed[group] then return end
          weighed[group] = true
          local said, now = c.prefix .. 'groups_weight_said', tonumber(c.now)
          local kept = tolerant(false, 'HGET', said, group)
          local at, since = nil, 0
          if type(kept) == 'string' then
            local at_text, since_text = string.match(kept, '^(%d+) (%d+)$')
            at, since = tonumber(at_text), tonumber(since_text) or 0
            if at and now and at <= now and now - at < 60000 then
              tolerant(0, 'HSET', said, group, at_text .. ' ' .. string.format('%d', since + 1))
              return
            end
          end
          redis.log(redis.LOG_WARNING, 'minitask: ignored the weight '
                    .. string.sub(raw, 1, 40) .. ' of group ' .. group .. ' in ' .. weights
                    .. ' (not minitask\'s: a weight is a whole number from 1 to 1000000);'
                    .. ' served at weight 1 (said at most once a minute; '
                    .. string.format('%d', since) .. ' more call(s) met it since the last line)')
          if now then
            tolerant(0, 'HSET', said, group, string.format('%.0f', now) .. ' 0')
            tolerant(0, 'PEXPIRE', said, 3600000)
          end
        end

        -- a weight is a whole number from 1 to a million (set_group_weight); any other
        -- (inf, 1e300, 1.5, 99999999999: not minitask's) is 1, or the group would keep
        -- the head for ever (or near enough), said in Redis's log (say_weight)
        local function weight_of(group)
          if any_weight == nil then any_weight = tolerant(0, 'EXISTS', weights) == 1 end
          if not any_weight then return 1 end
          local raw = tolerant(false, 'HGET', weights, group)
          local weight = guards().whole(raw, 1, 1000000)
          if raw and not weight then say_weight(group, raw) end
          return weight or 1
        end
        set_made = {base = base, settle = settle, task_of = task_of, first = first,
                    weight_of = weight_of}
      end
      return set_made
    end

    -- The functions few fetches need (a group joined, put back in the rotation, its
    -- claim checked, a slot holder checked, a count changed): made by fair_rare() at
    -- the first call that needs one, as one table `rare` (each closure costs Redis
    -- about 1,000 instructions a call, made whether called or not). Called as the
    -- library's __index (made, name) it returns that function, for arm() and join();
    -- called with no name, the table.
    local rare
    local function fair_rare(_, name)
      if not rare then
        local set = fair_set()
        local base, settle, task_of, first = set.base, set.settle, set.task_of, set.first

        -- (the queue's count last: a refusal part way leaves it under, not over, the
        -- tasks its callers wrote before: a count under goes at 0, one over stays)
        local function tally(group, delta)
          settle(group)
          tolerant(0, 'ZINCRBY', groups, delta, group)
          tally_total(delta)
        end

        -- The turn's next generation (HINCRBY gen 1): a gen that is no count minitask
        -- wrote starts afresh (lib.lua's bump), and never fails the call
        -- (a turn of another type is quarantined first: flow_write)
        local function next_gen(turn, group)
          local gen = redis.pcall('HINCRBY', turn, 'gen', 1)
          if type(gen) == 'table' and string.find(tostring(gen.err), 'WRONGTYPE', 1, true) then
            flow_made.quarantine(turn, 'hash', group)
            gen = redis.call('HINCRBY', turn, 'gen', 1)
          elseif type(gen) == 'table' then
            gen = guards().bump(turn, 'gen', 1)
          end
          return gen
        end

        -- A new live token of the group in the list of `priority`, at its head or tail;
        -- `served`: the turn's fetches so far, written in the same HSET; `member`: the
        -- group's one task, held in the token (a solo group), after `sep` (':' reads as a
        -- spec of no limit, expiry or group limit, leased unread; '/' any: join())
        local function push(group, priority, at_head, served, member, sep)
          local write = flow_made.write
          if sep == ':' then
            -- a plain task's solo group: its claim in groups_solo only, its token counted
            -- as its task in its ready list (no cancelled entry)
            local gen = c.now .. '.1:' .. member
            write('hash', group, 'HSET', solos, group, gen)
            write('list', group, at_head and 'LPUSH' or 'RPUSH',
                  KEYS[c.first_ready + 9 - priority], '\255' .. gen .. '\255' .. group)
            flow_made.fair_made.pushed = true
            return
          end
          local turn = base(group) .. ':turn'
          local gen = c.now .. '.' .. next_gen(turn, group)
          if member then gen = gen .. sep .. member end
          if served then
            write('hash', group, 'HSET', turn, 'tok', gen, 'band', priority, 'served', served)
          else
            write('hash', group, 'HSET', turn, 'tok', gen, 'band', priority)
          end
          local token = '\255' .. gen .. '\255' .. group
          write('list', group, at_head and 'LPUSH' or 'RPUSH', KEYS[c.first_ready + 9 - priority],
                token)
          -- counted out of the ready lists' lengths as a cancelled entry is (no task)
          flow_put('zset', 'ZADD', c.cancelled, priority, token)
          flow_made.fair_made.pushed = true
        end

        -- Whether a turn's claim of a live token, `tok` in the list of `band`, is one
        -- minitask wrote: a generation (now '.' count, then '/' and a solo group's task,
        -- or not; '+' first for a group in its set form since) and a priority, 0 to 9;
        -- with `check`, also that the token is in a ready list (its entry in cancelled:
        -- one ZSCORE).
        local function claimed(group, tok, band, check)
          if tok and string.byte(tok) == 43 then tok = string.sub(tok, 2) end  -- '+'
          local after = tok and string.match(tok, '^%-?%d+%.%-?%d+(.?)')
          if not (band and string.find(band, '^%d$')
                  and (after == '' or after == '/' or after == ':')) then
            return false
          end
          return not check or tolerant(false, 'ZSCORE', c.cancelled,
                                       '\255' .. tok .. '\255' .. group) ~= false
        end

        -- A line for Redis's log, every byte that is not printable ASCII escaped (it
        -- names data minitask did not write)
        local function printable(text)
          return (string.gsub(text, '[^ -~]', function(byte)
            return string.format('\\x%02x', string.byte(byte))
          end))
        end

        -- Whether the task `id` waits where a ready task of `group` can (its message kept,
        -- not dead): due later in delayed, in its group's ready set (at any priority), or on
        -- its way there in a ready list (promoted for its retry, put back, its lease
        -- expired: looked for HOLDER_SCAN entries from either end of each)
        local HOLDER_SCAN = 128
        local filled  -- the ready lists that hold entries (read once a call)
        local function elsewhere(id, group)
          if c.delayed and tolerant(false, 'ZSCORE', c.delayed, id) then return true end
          local members = {}
          for digit = 0, 9 do members[digit + 1] = digit .. id end
          local scores = tolerant({}, 'ZMSCORE', base(group) .. ':ready', unpack(members))
          for i = 1, 10 do
            if scores[i] then return true end
          end
          -- (read once a call, at its first look: the caller puts back first the entries
          -- a fetch popped ahead (serve()'s unpop), so the lists are whole then; and a
          -- fetch adds to no list a holder waits in)
          if not filled then
            filled = {}
            for i = c.first_ready, c.first_ready + 9 do
              if tolerant(0, 'LLEN', KEYS[i]) > 0 then filled[#filled + 1] = KEYS[i] end
            end
          end
          for _, list in ipairs(filled) do
            if tolerant(false, 'LPOS', list, id, 'MAXLEN', HOLDER_SCAN)
               or tolerant(false, 'LPOS', list, id, 'RANK', -1, 'MAXLEN', HOLDER_SCAN) then
              return true
            end
          end
          return false
        end

        -- Why the task `id`, named by a solo claim `tok` (of `priority`) read from
        -- groups_solo (lift()), is not `group`'s to take into its ready set, or nil when
        -- it is: its message kept, and either the claim's token in the ready list of its
        -- priority (a claim minitask wrote: its token holds its task, and nothing else
        -- does), or its flow spec naming this group, not dead, not leased, nowhere a task
        -- waits (elsewhere()). Any other (a planted claim naming another group's task,
        -- one of this group already waiting, a dead or leased one) taken in would strand
        -- the group behind a token that does not exist (its turn claiming it), or run
        -- the task twice. Cheapest first, the first problem said: a claim's token is
        -- pushed to the tail of its list as its group's first task is sent, so a second
        -- task sent soon after finds it among the last TOKEN_SCAN entries (one LPOS);
        -- one not found there (popped by the fetch calling, or far from the tail: a
        -- backlog sent since) is checked in full.
        local TOKEN_SCAN = 128
        local function owned(id, group, tok, priority)
          if tolerant(0, 'HEXISTS', c.messages, id) ~= 1 then return 'which does not exist' end
          -- (a copy of a claim lifted already, planted again: its group's turn claims its
          -- token, '+', and its task is in its set; taken again, it would be counted twice)
          if tolerant(false, 'HGET', base(group) .. ':turn', 'tok') == '+' .. tok then
            return 'which its group has taken in already (its turn claims its token)'
          end
          if tolerant(false, 'LPOS', KEYS[c.first_ready + 9 - priority],
                      '\255' .. tok .. '\255' .. group, 'RANK', -1, 'MAXLEN', TOKEN_SCAN) then
            return nil
          end
          local spec = flow_spec(tolerant(false, 'HGET', c.flow, id))
          if not (spec and spec.group == group) then
            if spec and spec.group then
              return 'whose flow spec names group ' .. string.sub(spec.group, 1, 64)
            end
            return 'whose flow spec names no group'
          end
          if tolerant(false, 'ZSCORE', c.dead, id) then return 'which is a dead letter' end
          if tolerant(false, 'ZSCORE', c.leases, id) or elsewhere(id, group) then
            return 'which is waiting elsewhere (leased, delayed, in its group\'s ready set'
                   .. ' or in a ready list)'
          end
          return nil
        end

        -- A solo group's task (its claim `tok`: a generation holding it) put in its ready
        -- set, at the token's count (its order of joining: before any task joining
        -- after it), and the claim marked '+': the same token, live, of a group in its set
        -- form. False, and nothing written, for any other claim. (A turn's claim naming
        -- a task that is not the group's, planted, is taken all the same: arm() then
        -- looks for its token and pushes a new one, and the fetch never leases a task
        -- that is delayed, dead or leased already; one of another group leaves the set
        -- for its own: serve())
        local function unsolo(group, tok)
          local count, member = string.match(tok or '', '^%-?%d+%.(%d+)[/:](.*)$')
          if not member or #member > MEMBER_MOST then return false end  -- (not ours)
          local _, priority = task_of(member, group)
          local order = tonumber(count)
          if not (order < RANK) then order = 0 end  -- no count minitask wrote: first
          flow_made.write('zset', group, 'ZADD', base(group) .. ':ready',
                          (9 - priority) * RANK + order, member)
          flow_made.write('hash', group, 'HSET', base(group) .. ':turn', 'tok', '+' .. tok)
          return true
        end

        -- A field of groups_solo that is no claim minitask writes (`claim`: too long, or
        -- of another shape), removed by the caller: said once in Redis's log, by its
        -- length (a planted 20 MB value is never copied into a log line)
        local function disowned(group, claim)
          redis.log(redis.LOG_WARNING, 'minitask: removed the field ' .. group .. ' of '
                    .. solos .. ': ' .. #claim .. ' bytes, no claim minitask writes (a'
                    .. ' generation, then \':\' and a task, ' .. CLAIM_MOST .. ' bytes at most);'
                    .. ' the group goes on, its task served from the token it holds')
        end

        -- A solo group of groups_solo (a ':' claim) put in its set form, as unsolo() does
        -- a turn's: its task in its ready set at the claim's count, the claim '+' ..
        -- generation in its turn (its band, and gen at that count: later joins order
        -- after it), its field gone from groups_solo; its task counted in groups_ready
        -- and groups, its token (live still, in its list) in cancelled. True when the
        -- group had such a claim; a field minitask did not write is removed, false: one
        -- of another shape, or naming a task that is not the group's to take (owned():
        -- gone, of another group, waiting elsewhere), said in Redis's log. Before the
        -- claim is checked, the group's removals owed by forget() are made (settle())
        -- and its field is removed from groups_solo (taken or not, it is read once);
        -- for a claim not taken nothing else is written, and the caller arms the group
        -- afresh (its task, if any, has its own token). `joining`: the id of the task
        -- joining the group (join()); a claim naming it is stale, not taken (a task is
        -- in one place: its token was served, and the removal of its claim refused, an
        -- ACL changed while the worker runs; taken, the group waited behind a token that
        -- was gone, for good)
        local function lift(group, joining)
          settle(group)
          local tok = tolerant(false, 'HGET', solos, group)
          if not tok then return false end
          tolerant(0, 'HDEL', solos, group)
          local count, member
          if #tok <= CLAIM_MOST then
            count, member = string.match(tok, '^%-?%d+%.(%d+):([0-9][ -~]*)$')
          end
          if not member or #member > MEMBER_MOST then
            disowned(group, tok)
            return false
          end
          local id, priority = string.sub(member, 2), string.byte(member) - 48
          if id == joining then return false end
          local problem = owned(id, group, tok, priority)
          if problem then
            redis.log(redis.LOG_WARNING, printable(
              'minitask: removed the field ' .. group .. ' of ' .. solos .. ': its claim'
              .. ' names task ' .. id .. ', ' .. problem .. ' (not a claim minitask wrote);'
              .. ' the group is armed afresh'))
            return false
          end
          local order = tonumber(count)
          if not (order < RANK) then order = 0 end
          flow_made.write('zset', group, 'ZADD', base(group) .. ':ready',
                          (9 - priority) * RANK + order, member)
          flow_made.write('hash', group, 'HSET', base(group) .. ':turn', 'tok', '+' .. tok,
                          'band', priority, 'gen', count)
          tally(group, 1)
          flow_put('zset', 'ZADD', c.cancelled, priority, '\255' .. tok .. '\255' .. group)
          return true
        end

        -- Put the group in the rotation if it has ready tasks, is not paused and has no
        -- live token at its highest priority (or above). at_head: at the head of its list
        -- (its own task comes back to its place), else at the tail. A turn's claim of a
        -- live token that minitask did not write (claimed()) is no token: a new one is
        -- pushed. Whether the claimed token exists is checked with `check` (the group came
        -- back through flow_due) or when the group has one ready task (it has just
        -- joined, or is about to leave): not for each task joining a group in the rotation.
        -- alone: the priority of the group's one ready task, when the caller knows the group
        -- had neither ready tasks nor a turn before it (so no token): nothing is read.
        local function arm(group, at_head, check, alone)
          arming = group  -- (a refusal before its return: flush() makes it due)
          settle(group)
          local id, priority, second = true, alone, nil
          if not alone then id, priority, second = first(group) end
          if not id or is_paused(group) then
            arming = nil
            return false
          end
          local live = not alone and tolerant({}, 'HMGET', base(group) .. ':turn', 'tok', 'band')
          if live and unsolo(group, live[1]) then
            -- a task joined a solo group: the group's task, in the set now, may be first;
            -- and its token is looked for (a claim planted in that form names none)
            live[1] = '+' .. live[1]
            id, priority, second = first(group)
            check = true
          end
          if live and live[1] and claimed(group, live[1], live[2], false)
             and tonumber(live[2]) >= priority
             and (not (check or not second) or claimed(group, live[1], live[2], true)) then
            arming = nil
            return false
          end
          push(group, priority, at_head)
          arming = nil
          return true
        end

        -- A ready grouped task joins its group: new tasks at the tail of their priority,
        -- one holding a slot (retried, put back, re-delivered) at its head, before
        -- every priority (below). `new`: the
        -- caller found the group's ready set and turn empty before its first write: the
        -- group is solo, its task held in its token (unless it is paused).
        local function join(id, spec, priority, new)
          local group = spec.group
          settle(group)
          local holds = spec.group_most > 0
                        and tolerant(0, 'SISMEMBER', base(group) .. ':running', id) == 1
          local member = string.sub('0123456789', priority + 1, priority + 1) .. id
          if new and not is_paused(group) then
            local plain = spec.limiter == '' and spec.count == 0 and spec.window == 0
                          and spec.most == 0 and spec.expires == 0 and spec.group_most == 0
                          and spec.group_count == 0 and spec.group_window == 0
            push(group, priority, holds, nil, member, plain and PLAIN_SOLO_CLAIM or '/')
            -- counted once its claim is written (a ':' claim's token counts its task):
            -- a send refused before, part way (an ACL changed since its check), leaves
            -- it uncounted, and sent again it joins the group's set, counted once
            if not plain then tally(group, 1) end
            return true
          end
          -- a solo group takes its set form first (its task ordered first): one of
          -- groups_solo here, one of its turn ('/') by arm() below, but for a paused
          -- group, whose arm() reads nothing: here too (left in its claim, a cancel of
          -- the task joining it deleted the turn holding it, and it never ran)
          lift(group, id)
          if is_paused(group) then
            unsolo(group, tolerant(false, 'HGET', base(group) .. ':turn', 'tok'))
          end
          local ready = base(group) .. ':ready'
          -- a holder goes before every waiting task of its group, whatever their
          -- priorities (its slot blocks them: behind one of a higher priority, the
          -- group would wait for a slot only it can free), holders by priority
          local score = holds and (9 - priority) - 10
                        or (9 - priority) * RANK + next_gen(base(group) .. ':turn', group)
          if flow_made.write('zset', group, 'ZADD', ready, score, member) == 1 then
            tally(group, 1)
          end
          return arm(group, holds, false, new and priority)
        end

        -- Whether a group_max_running slot holder of `group` still holds its slot: its
        -- task is leased, or (its message kept, not dead) waiting for its retry in
        -- delayed, back in its group's ready set (where a holder rejoins, at the head of
        -- its priority) or on its way there in a ready list (elsewhere()). Anything else
        -- (a cancelled or dead task, an id planted with a message or without) holds
        -- none, and its slot is freed (flow_made.vacate).
        local function alive(id, group)
          if tolerant(false, 'ZSCORE', c.leases, id) then return true end
          if tolerant(0, 'HEXISTS', c.messages, id) ~= 1
             or tolerant(false, 'ZSCORE', c.dead, id) then
            return false
          end
          return elsewhere(id, group)
        end
        -- The first members of a group's `ready` set, ranks 0 to `last` (text) at least, as
        -- `read` (one ZRANGE, just made: nothing written to the set since) holds them,
        -- without those longer than MEMBER_MOST: each removed by its rank (ZREMRANGEBYRANK,
        -- the highest first so that the others keep theirs: the member itself is never
        -- sent back to Redis) and said once in Redis's log by its length, not its bytes;
        -- then the range read again, so the group goes on with its next members: ranks 0
        -- to 31 while a read's members come to less than LONG_BYTES in all (many planted
        -- members go some 32 a read), else to `last` (a few huge ones: no more of them held
        -- at once). A planted member was never counted in the group's tallies: none
        -- changes. At most SHORT_ROUNDS reads a call: past them, the short members of the
        -- last read and true: long members may remain ahead of the group's tasks, so the
        -- group stays armed and its next call goes on removing (the caller's onward()).
        local SHORT_ROUNDS, LONG_BYTES = 100, 65536
        local function shortened(ready, group, read, last)
          local wide = tonumber(last) < 31 and '31' or last
          for _ = 1, SHORT_ROUNDS do
            local long, bytes = false, 0
            for i = #read, 1, -1 do
              local length = #read[i]
              bytes = bytes + length
              if length > MEMBER_MOST then
                long = true
                tolerant(0, 'ZREMRANGEBYRANK', ready, i - 1, i - 1)
                redis.log(redis.LOG_WARNING, 'minitask: removed a member of ' .. ready .. ', '
                          .. length .. ' bytes long: longer than any minitask writes there ('
                          .. MEMBER_MOST .. ' bytes at most: a digit and an id); group '
                          .. group .. ' goes on with its next task')
              end
            end
            if not long then return read, false end
            read = tolerant({}, 'ZRANGE', ready, '0', bytes < LONG_BYTES and wide or last)
          end
          local kept = {}
          for i = 1, #read do
            if #read[i] <= MEMBER_MOST then kept[#kept + 1] = read[i] end
          end
          return kept, true
        end
        -- A group whose next members may be long ones still to remove (shortened()'s
        -- cap): not emptied but armed afresh, its token at the tail (a new one: the
        -- caller's leaves), so that its next fetch goes on removing them. False when
        -- arm()'s read found the set empty at last (the caller forgets the group)
        local function onward(group, turn, unpop)
          tolerant(0, 'HDEL', turn, 'tok', 'band')
          if unpop then unpop() end
          return arm(group, false)
        end
        -- A solo group's token (`gen`: a generation, ':' or '/', its task) popped stale:
        -- its claim, in groups_solo or the turn (`tok`), names another token, or none (a
        -- claim changed, planted or deleted: data minitask did not write). Its task, held
        -- in that token only, is stranded when it is nowhere else (no lease, its message
        -- kept, not dead, not delayed, in no ready set or list): it joins its group's set
        -- (a '/' claim's task, counted as it joined its group, at the head when it holds
        -- a group_max_running slot; a ':' claim's, counted here), with a line in Redis's
        -- log. When it was, or when the turn's claim names this same task in another
        -- generation (a task has one token: this one), the turn's claim is no live token:
        -- it is dropped (its cancelled entry with it; taken in by arm(), a '/' claim
        -- naming another group's task would put that task in this group's set) and the
        -- group armed afresh. A task found elsewhere is left there: never run twice.
        -- True when the group was armed here. unpop: called first.
        local function strayed(group, gen, turn, tok, unpop)
          local sep, member = string.match(gen, '^%-?%d+%.%d+([:/])([0-9].*)$')
          if not member or #member > MEMBER_MOST then return false end
          local forged = type(tok) == 'string' and #tok <= CLAIM_MOST + 1
                         and string.match(tok, '^%+%-?%d+%.%d+[:/]([0-9].*)$') == member
          local id = string.sub(member, 2)
          -- the entries popped after this token go back first: its task may be one of
          -- them, and alive() looks in the ready lists (elsewhere(): which hold entries
          -- read once a call)
          if unpop then unpop() end
          -- (its spec is not read: one naming another group, or none, leaves the group's
          -- set for the ready list as it is served, and its own group takes it back)
          local lost = tolerant(0, 'HEXISTS', c.messages, id) == 1
                       and not tolerant(false, 'ZSCORE', c.dead, id) and not alive(id, group)
          if not (forged or lost) then return false end
          if lost then
            lift(group)  -- a claim still in groups_solo takes its set form first
            local priority = string.byte(member) - 48
            local score
            if sep == '/' and tolerant(0, 'SISMEMBER', base(group) .. ':running', id) == 1 then
              score = (9 - priority) - 10  -- a slot holder: first (join())
            else
              score = (9 - priority) * RANK + next_gen(turn, group)
            end
            if flow_made.write('zset', group, 'ZADD', base(group) .. ':ready', score,
                               member) == 1 and sep == ':' then
              tally(group, 1)
            end
            redis.log(redis.LOG_WARNING, 'minitask: task ' .. id .. ' of group ' .. group
                      .. ' was held by a token its claim (in '
                      .. (sep == ':' and solos .. ' or ' or '') .. turn
                      .. ') no longer named: it joined its group again, which gets a new token')
          end
          local claim = tolerant(false, 'HGET', turn, 'tok')
          if type(claim) == 'string' and #claim <= CLAIM_MOST + 1 then
            if string.byte(claim) == 43 then claim = string.sub(claim, 2) end
            tolerant(0, 'ZREM', c.cancelled, '\255' .. claim .. '\255' .. group)
          end
          tolerant(0, 'HDEL', turn, 'tok', 'band')
          arm(group, false, true)
          return true
        end
        rare = {tally = tally, next_gen = next_gen, push = push, claimed = claimed,
                unsolo = unsolo, lift = lift, arm = arm, join = join, alive = alive,
                shortened = shortened, onward = onward, strayed = strayed,
                disowned = disowned}
      end
      if name then return rare[name] end
      return rare
    end

    -- A group with no ready task leaves nothing behind but the slots its tasks hold
    local function forget(group, turn)
      forgotten[group] = turn
      if owed_by then owed_by[group] = nil end
    end

    -- The task of `member` served from its group's ready set leaves it, counted
    local function take(group, ready, member)
      if tolerant(0, 'ZREM', ready, member) == 1 then
        owed = owed - 1
        owed_by = owed_by or {}
        owed_by[group] = (owed_by[group] or 0) - 1
      end
    end

    -- the spec of a grouped task of no limits, no expiry and no debounce, its group
    -- set by serve() (made once, at the first such task of a group in its set form: a
    -- table costs Redis about 4,000 instructions; a solo group's task needs none)
    local unlimited

    -- A token kept in hand by serve() (`holding`): the fetch's next pop would have
    -- been this token, so the fetch serves it again without the pop, its claim's read
    -- (nothing in the call changed it since), its weight's, and the push back (one
    -- push when the run ends: serve(false)). held: its state, one table a run.
    -- While held the token is in no list, and Redis keeps what a script wrote before
    -- an error: nothing between keeping it and serve(false) may raise (the writes
    -- there tolerate keys of another type; Redis checks memory before a script's
    -- first write only).
    local holding, held = false, nil

    -- Serve a popped token: the group's first task, admitted by its limits, as
    -- id, body, priority, spec (nil: a solo group's task of no limits); or nil (every pop that leases nothing counts as
    -- dropped, so a fetch stays bounded), and, when the task's own limits hold it,
    -- {limiter, when to try again} (flow_held_by_task: the caller parks the token,
    -- still live, in that limiter's park list). A live token
    -- that goes back keeps its generation, and its entry in cancelled (rescored if
    -- its band changes): any other pop leaves cancelled.
    -- `band`: the priority of the list the token was popped from (a live token's is
    -- its turn's band: push() writes both), so that only its generation is read.
    -- `run`: how many more tasks the fetch takes after this one; `alone`: nothing
    -- else was left in the token's list when it was popped. When the token would be
    -- the fetch's next pop (it goes back to that list, at its head or alone) and the
    -- fetch wants more, it is kept in hand instead (a fifth value, true: the caller
    -- serves it again, as popped, and calls serve(false) when it stops: the token goes
    -- back to the list it was popped from, at its head while its turn lasts, else at
    -- the tail, as the last serve would have pushed it had it not kept it (no closure
    -- of its own: each costs every call that makes the library). `unpop`: the
    -- caller's entries popped after this token from its list, not served yet, put back
    -- at its head (a function), called before any write to a ready list but the
    -- token's own push to the tail of its list (or to another list), and before
    -- elsewhere() looks in the ready lists (a stray's task, a paused group's claim's, the
    -- slot holders': one popped ahead is in none, and the lists it reads are kept for
    -- the call): the entries were before it, and are still, without the pushes and pops
    -- back and forth.
    local function serve(token, budget, band, run, alone_in_list, unpop)
      -- h: the held token's state, when this is it (the caller's token)
      -- members, at, whole: the group's first tasks read (the set's first members), the
      -- index of the next, and whether they are all of them
      -- indexed: the token is a solo group's of groups_solo (its claim live there)
      local gen, group, turn, tok, solo, set, ready, h, members, at, whole, indexed
      if token == false then  -- the held token released
        h = held
        if not h then return nil end  -- (none held: fetch.lua's refusal asks all the same)
        -- (held until its push is made: a refusal of it leaves it to be released again,
        -- and names it `releasing` for fetch.lua's put-back)
        flow_made.fair_made.releasing = h.token
        flow_made.write('list', h.group, h.at_head and 'LPUSH' or 'RPUSH',
                        KEYS[c.first_ready + 9 - h.band], h.token)
        holding, held = false, nil
        flow_made.fair_made.pushed, flow_made.fair_made.placed = true, h.token
        flow_made.fair_made.releasing = false
        return nil
      elseif holding then
        holding, h, held = false, held, nil
        group, turn, tok, set, ready = h.group, h.turn, h.tok, fair_set(), h.ready
        members, at, whole, alone_in_list = h.members, h.at, h.whole, h.alone
      else
        -- '\255' .. generation .. '\255' .. group (a plain find: a pattern costs Redis
        -- some 40 instructions a byte, and a solo group's generation holds its task)
        local cut = string.find(token, '\255', 2, true)
        if cut and cut < #token then
          gen, group = string.sub(token, 2, cut - 1), string.sub(token, cut + 1)
          if forgotten[group] then fair_set().settle(group) end
        end
        turn = gen and c.prefix .. 'g:' .. group .. ':turn'
        tok = gen and redis.pcall('HGET', turn, 'tok')
        -- a ':' token whose turn holds no claim: its claim is looked for in groups_solo
        -- (its one place while solo; a group in its set form since has its claim, '+',
        -- in its turn, read first: its every serve reads one key)
        local sep = not tok and gen and string.find(gen, '[/:]')
        if sep and string.byte(gen, sep) == 58 then
          local claim = redis.pcall('HGET', solos, group)
          if type(claim) == 'table' then
            -- groups_solo of another type (data minitask did not write): no claim can be
            -- read, so the token is taken as live, paused or not: its task, if its
            -- message is still there, runs once (the token is popped), never stranded
            guards().foreign(claim)
            indexed, tok = true, gen
          elseif type(claim) == 'string' and claim ~= gen
                 and (#claim > CLAIM_MOST or not string.find(claim, '^%-?%d+%.%d+:[0-9]')) then
            -- no claim minitask writes (garbage, a huge value): removed, read once here;
            -- this token's task is then served as a stray (below)
            tolerant(0, 'HDEL', solos, group)
            fair_rare().disowned(group, claim)
          elseif claim == gen then
            if is_paused(group) then
              -- a paused group leaves the rotation, its task kept in its set (below);
              -- the entries popped after this token go back first (lift() looks in the
              -- ready lists for its task)
              if unpop then unpop() end
              fair_rare().lift(group)
              tok = redis.pcall('HGET', turn, 'tok')
            else
              indexed, tok = true, gen
            end
          end
        end
        if type(tok) == 'table' then
          -- a turn of another type: no token of the group could be told live. The token
          -- is dropped; a group with ready tasks has its turn quarantined and is armed
          -- afresh (one without is left as it is: nothing of minitask's is lost there)
          guards().foreign(tok)
          leave(token, band)
          -- (a '/' token's task, held in it only, joins its group's set: the turn is
          -- quarantined as it does, strayed()'s next_gen)
          if gen and string.find(gen, '^%-?%d+%.%d+/')
             and fair_rare().strayed(group, gen, turn, false, unpop) then
            return nil
          end
          if fair_set().first(group) then
            flow_made.quarantine(turn, 'hash', group)
            if unpop then unpop() end
            fair_rare().arm(group, true)
          end
          return nil
        end
        -- live: the claim names this token (a solo group's: the token holds its task; or
        -- '+' first: a group in its set form since)
        local live = gen and (tok == gen or tok == '+' .. gen)
        if not live or is_paused(group) then
          leave(token, band)
          -- a paused group leaves the rotation (a solo group's task kept in its set); a
          -- stale token is dropped, and the group put back in the rotation if the turn
          -- claims a token that is not there (a claim minitask did not write)
          if live then
            fair_rare().unsolo(group, tok)
            tolerant(0, 'HDEL', turn, 'tok', 'band')
          elseif gen and string.find(gen, '^%-?%d+%.%d+[:/]')
                 and fair_rare().strayed(group, gen, turn, tok, unpop) then
            return nil  -- (a solo group's token its claim no longer names)
          elseif gen and tok and not fair_rare().claimed(
                   group, tok, tolerant(false, 'HGET', turn, 'band'), true) then
            tolerant(0, 'HDEL', turn, 'tok', 'band')
            if unpop then unpop() end
            fair_rare().arm(group, false)
          end
          return nil
        end
        -- The queue's count, which flush() lowers by the tasks this call takes from their
        -- sets or '/' claims, is asked once a call before the first of those writes (an
        -- ACL without INCRBY, taken away while the worker runs: refused in flush(), after
        -- them, it over-counted for good): refused here, the token goes back as for any
        -- refusal before a write (lib.lua's countable; inline: one acl_check_cmd a call,
        -- guards() made only when it says no, or on Redis 6.2). A ':' claim's task is
        -- never counted
        if not (asked or indexed) then
          asked = true
          local total = c.prefix .. 'groups_ready'
          if not (redis.acl_check_cmd and redis.acl_check_cmd('INCRBY', total, '0')) then
            guards().countable('INCRBY', total)
          end
        end
        -- a solo group's task: taken from the token, no ready set read (its first pass)
        -- (its id is cut from the generation straight away: the member, whose one use is
        -- the ready set's, is no string made)
        solo = tok == gen and (sep or string.find(gen, '[/:]'))
        set = not solo and fair_set()  -- (a solo group's task needs none of it)
        ready = set and set.base(group) .. ':ready'
      end
      while budget > 0 do
        local id, priority, next_id, next_priority, member, alone
        if solo then
          local digit = string.byte(gen, solo + 1)
          if digit and digit >= 48 and digit <= 57 then
            id, priority = string.sub(gen, solo + 2), digit - 48
          else
            id, priority = fair_set().task_of(string.sub(gen, solo + 1), group)
          end
          alone, solo = true, nil
        else
          set = set or fair_set()
          ready = ready or set.base(group) .. ':ready'
          -- its first tasks (one ZRANGE, without scores), as set.first() reads them, and
          -- for a token that may be kept in hand (alone in its list), those of the run:
          -- read once, taken in turn (nothing else in the call takes from the set)
          if not (members and (members[at + 1] or whole)) then
            local n = (run and run > 0 and alone_in_list) and run + 1 or 1
            members, at = tolerant({}, 'ZRANGE', ready, '0', n == 1 and '1' or n), 1
            local more = false
            for i = 1, #members do  -- (a length compared: no task's member is longer)
              if #members[i] > MEMBER_MOST then
                members, more = flow_made.fair_made.shortened(ready, group, members,
                                                             n == 1 and '1' or n)
                break
              end
            end
            -- (long members may remain after those read: never whole, the group not
            -- emptied, onward() below)
            whole = #members <= n and not more
          end
          member = members[at]
          if member then
            id, priority = set.task_of(member, group)
            next_id = members[at + 1]
            if next_id then next_priority = select(2, set.task_of(next_id, group)) end
          end
        end
        if not id then
          -- (whole is false here only past shortened()'s cap)
          leave(token, band)
          if whole == false and fair_rare().onward(group, turn, unpop) then return nil end
          forget(group, turn)
          return nil
        end
        local body = c.body_of(id)
        -- (redis.pcall inline, as on the other hot paths: tolerant() is a vararg call)
        local text = body and redis.pcall('HGET', c.flow, id)
        if type(text) == 'table' then guards().foreign(text) text = false end
        local spec
        -- a spec of no limits, no expiry, no debounce (most) is told by one comparison,
        -- not parsed (two matches and a table: some 10,000 instructions)
        local plain = text == '\n0\n0\n0\n0\n0\n0\n0\n0\n' .. group
        if plain and alone then
          -- a solo group's task of no limits (100,000 groups of one task each): no
          -- limit to count, no spec to make; the group is gone (its groups entry with it)
          if indexed then
            tolerant(0, 'HDEL', solos, group)  -- (its one key: nothing else to remove)
            return id, body, priority, nil
          end
          leave(token, band)  -- (first: a refusal of it leaves the count as it was)
          owed = owed - 1
          forget(group, turn)
          return id, body, priority, nil
        elseif plain then
          unlimited = unlimited or {limiter = '', count = 0, window = 0, most = 0, expires = 0,
                                    group_most = 0, group_count = 0, group_window = 0}
          spec = unlimited
          spec.group = group
        else
          spec = flow_spec(text)
        end
        if not (spec and spec.group == group) then
          -- gone (no message: cancelled before cancel.lua withdrew grouped ids, or with
          -- a spec it could not read; dead, delayed), or a task whose spec names no
          -- group here: it leaves the group either way (a solo group's token with it:
          -- leave() before the writes below)
          if alone and not indexed then leave(token, band) end
          if not alone then at = at + 1 end
          if indexed then
            tolerant(0, 'HDEL', solos, group)  -- (never counted in groups_ready)
          elseif alone or tolerant(0, 'ZREM', ready, member) == 1 then
            fair_rare().tally(group, -1)
          end
          if body then
            -- its spec names another group, none, or none that parses (data minitask did
            -- not write): never dropped, it goes to the ready list of its priority, from
            -- which the fetch serves it as its spec says (as for an ungrouped task: a
            -- spec that does not parse is no limit; another group's: it joins that
            -- group). Redis's log names the key, the field and the problem. Inline: a
            -- closure would cost every fetch (flow_control's header)
            if unpop then unpop() unpop = nil end
            alone_in_list = false  -- (the token's list may hold it now)
            flow_made.write('list', group, 'RPUSH', KEYS[c.first_ready + 9 - priority], id)
            flow_made.fair_made.pushed = true
            local problem = not text and 'is missing'
                            or spec and spec.group and 'names group ' .. spec.group
            redis.log(redis.LOG_WARNING, flow_made.unreadable(
              text, id, c.flow, 'the task left group ' .. group .. ' for the ready list of'
              .. ' priority ' .. priority .. ' and runs as its spec says (without the limits'
              .. ' it cannot read)', problem))
          else
            tolerant(0, 'ZREM', c.cancelled, id)
          end
          budget = budget - 1
          if indexed then return nil end  -- (its one key gone above)
          if alone then  -- a solo group's task: the group is empty (its token left above)
            forget(group, turn)
            return nil
          end
        else
          local running = spec.group_most > 0 and fair_set().base(group) .. ':running'
          local holds = spec.group_most > 0 and tolerant(0, 'SISMEMBER', running, id) == 1
          local out_at  -- out of the rotation: until a slot frees (-1), or this ms
          if spec.group_most > 0 and not holds then
            local held = tolerant(0, 'SCARD', running)
            if held >= spec.group_most then
              -- a sample of the holders checked (flow_made.vacate): those that hold no
              -- slot any more free theirs. The ids this fetch popped ahead go back to
              -- their list first: a holder among them (promoted, reclaimed, behind
              -- this token) is in no list while held here, and alive() looks there
              if unpop then unpop() unpop = nil alone_in_list = false end
              local alive, freed = fair_rare().alive, false
              held, freed = flow_made.vacate(running, held, spec.group_most, function(member)
                return alive(member, group)
              end, c.now, c.flow, function(text)  -- (flow_end's read of a holder's group)
                return type(text) == 'string' and string.match(text, HOLDS_GROUP) == group
              end)
              -- full still: an outcome frees a slot (flow.lua's finish); but with holders
              -- freed, the group comes back at once, to check more of them, and with more
              -- holders than it allows (ghosts left unsampled) in a second
              if held >= spec.group_most then
                out_at = freed and tonumber(c.now) or held > spec.group_most
                         and tonumber(c.now) + 1000 or -1
              end
            end
          end
          if not out_at and spec.group_count > 0 and not holds then
            local free, retry_at = flow_made.admit(
              c.prefix, {limiter = 'g:' .. group, most = 0, count = spec.group_count,
                         window = spec.group_window}, id, c.clock(), c.leases)
            if not free then out_at = retry_at end
          end
          if not out_at and spec.limiter ~= '' then  -- (no limiter: held by none)
            local held = flow_made.held_by_task(c, spec, id)
            if held then
              -- (parked, the token is in no ready list: a ':' claim's task counted in its
              -- set form, as any parked token's)
              if indexed then fair_rare().lift(group) end
              tolerant(0, 'ZREM', c.cancelled, token)
              return nil, held
            end
          end
          if out_at then
            -- (leave() after lift(), which marks the token: its group in its set form)
            if indexed then
              fair_rare().lift(group)  -- its task waits in its set
            elseif alone then
              fair_rare().unsolo(group, tok)  -- its task waits in its set
            end
            leave(token, band)
            tolerant(0, 'HDEL', turn, 'tok', 'band')
            if out_at >= 0 then flow_put('zset', 'ZADD', c.flow_due, out_at, 'g:' .. group) end
            return nil
          end
          -- the group's last task: its token leaves, before the writes of its serve
          if not (next_id or indexed) then leave(token, band) end
          if spec.group_most > 0 and not holds then
            flow_made.write('set', group, 'SADD', running, id)
          end
          if indexed then
            tolerant(0, 'HDEL', solos, group)  -- the group is gone: its one key
          elseif alone then
            owed = owed - 1  -- the group is gone (below): its groups entry with it
          else
            at = at + 1
          end
          if indexed then return id, body, priority, spec end
          -- taken: the task leaves its group's set, its last write (below) where the
          -- token goes back or is kept in hand: a refusal before (an ACL changed while
          -- the worker runs) leaves it there, and the token in the fetch's hand
          local taken = not alone and member
          if not next_id then
            if taken then take(group, ready, member) end
            -- (past shortened()'s cap: long members may remain)
            if whole == false and fair_rare().onward(group, turn, unpop) then
              return id, body, priority, spec
            end
            forget(group, turn)  -- its groups entry goes, and the count it was owed
            return id, body, priority, spec
          end
          -- the token goes back: at the head while the turn lasts (the weight); its
          -- turn's state is written only when it changes. The turn's fetches are read
          -- only for a group of a weight above 1 (at 1 every turn is one fetch)
          -- (a count of fetches minitask did not write is none: 0)
          -- (a held token's weight and fetches are in hand: read once a run)
          local weight = h and h.weight or fair_set().weight_of(group)
          local at_head, was, served = false, 0, 0
          if weight > 1 then
            if h then
              was, served = h.was, h.served
            else
              was = tonumber(tolerant(false, 'HGET', turn, 'served')) or 0
              served = was
              if not (served >= 0 and served < 1e9) then served = 0 end
            end
            served = served + 1
            at_head = served < weight
            if not at_head then served = 0 end
          end
          if run and run > 0 and band == next_priority and (at_head or alone_in_list) then
            -- the fetch's next pop would be this token again: kept in hand (serve(false)).
            -- The turn's fetches (a weight above 1) are written as they change, as each
            -- push wrote them: whatever ends the run (the group's limits, its last task)
            -- leaves the turn as popping the token each time would have
            if served ~= was then
              flow_made.write('hash', group, 'HSET', turn, 'served', served)
              was = served
              if h then h.was = was end
            end
            if not h then
              h = {token = token, group = group, turn = turn, tok = tok, band = band,
                   ready = ready, weight = weight, was = was}
            end
            h.served, h.at_head, h.members, h.at, h.whole = served, at_head, members, at, whole
            h.alone = alone_in_list
            if taken then take(group, ready, member) end
            holding, held = true, h
            return id, body, priority, spec, true
          end
          if band ~= next_priority then
            flow_made.write('hash', group, 'HSET', turn, 'band', next_priority, 'served', served)
          elseif served ~= was then
            flow_made.write('hash', group, 'HSET', turn, 'served', served)
          end
          if at_head and band == next_priority and unpop then unpop() end
          flow_made.write('list', group, at_head and 'LPUSH' or 'RPUSH',
                          KEYS[c.first_ready + 9 - next_priority], token)
          flow_made.fair_made.pushed, flow_made.fair_made.placed = true, token
          if band ~= next_priority then flow_put('zset', 'ZADD', c.cancelled, next_priority, token) end
          if taken then take(group, ready, member) end
          return id, body, priority, spec
        end
      end
      -- a long run of stale entries: the token goes back at the head for the next fetch
      leave(token, band)
      tolerant(0, 'HDEL', turn, 'tok', 'band')
      if unpop then unpop() end
      fair_rare().arm(group, true)
      return nil
    end

    -- pushed, told: false, so that reading them calls no __index
    -- placed: the token the last serve() (or fetch.lua's park_token()) put in a list,
    -- for a refusal after it (an ACL changed while the worker runs) not to put it back
    -- twice (fetch.lua resets it as it takes a token in hand)
    flow_made.fair_made = setmetatable({serve = serve, flush = flush, pushed = false,
                                        told = false, placed = false, releasing = false},
                                       {__index = fair_rare})
    return flow_made.fair_made
  end

  -- `command` on `key`, where minitask keeps a `kind` for `group`: a key of another
  -- type is quarantined first (flow_quarantine), and the write made all the same.
  -- One redis.pcall on the hot path; an error other than a type's is raised.
  local function flow_write(kind, group, command, key, ...)
    local reply = redis.pcall(command, key, ...)
    if type(reply) == 'table' and reply.err then
      guards().foreign(reply)
      flow_made.quarantine(key, kind, group)
      reply = redis.call(command, key, ...)
    end
    return reply
  end

  -- The functions few calls need (limits counted, a key moved aside):
  -- made by flow_limits() the first time a script reads one of them from the
  -- library (its metatable's __index), so that a call of tasks without limits
  -- (a plain grouped task's fetch, its ack) makes none of their closures (each
  -- costs Redis about 1,000 instructions a call).
  local function flow_limits(made, name)
    if name == 'unreadable' then
      -- The line for Redis's log of a flow spec `text` that cannot be read, of task `id`
      -- in the flow hash `key`: the `problem` (by default, the spec's first line that
      -- is no number minitask writes, named), and the `outcome`; every byte that is not
      -- printable ASCII escaped (it is data minitask did not write). Made at its first
      -- use: no call that meets no such spec makes it.
      local function unreadable(text, id, key, outcome, problem)
        if not problem then
          local names = {'', 'the rate count', 'the rate window', 'max_running', 'expires',
                         'debounce', 'group_max_running', 'the group rate count',
                         'the group rate window'}
          local most = {0, FLOW_MOST, FLOW_WINDOW, FLOW_MOST, FLOW_EXPIRES, 9, FLOW_MOST,
                        FLOW_MOST, FLOW_WINDOW}
          local n = 0
          for line in string.gmatch(text .. '\n', '([^\n]*)\n') do
            n = n + 1
            if n > 1 and n < 10 and not string.find(line, '^%d+$') then
              problem = 'holds ' .. names[n] .. ' ' .. string.sub(line, 1, 40)
                        .. ' (line ' .. n .. '), no count'
              break
            elseif n > 1 and n < 10 and tonumber(line) > most[n] then
              problem = 'holds ' .. names[n] .. ' ' .. string.sub(line, 1, 40) .. ' (line '
                        .. n .. '), more than minitask writes (at most '
                        .. string.format('%d', most[n]) .. ')'
              break
            elseif n == 10 then
              if line == '' then problem = 'names an empty group' end
              break
            end
          end
          problem = problem or ('is no spec minitask writes (' .. n .. ' lines)')
        end
        return (string.gsub(
          'minitask: the flow spec of task ' .. id .. ' (field ' .. id .. ' of ' .. key .. ') '
          .. string.sub(problem, 1, 200) .. ': not one minitask wrote; ' .. outcome,
          '[^ -~]', function(byte) return string.format('\\x%02x', string.byte(byte)) end))
      end
      rawset(made, 'unreadable', unreadable)
      return unreadable
    end
    if name == 'vacate' then
      -- Free the slots of a full max_running or group_max_running set `running`
      -- (holding `held`, `most` at most) whose holders hold none any more: a holder
      -- whose flow spec in `flow` is not one whose outcome frees this slot (`frees`(its
      -- spec) false: the spec deleted, the flow hash deleted or of another type, the
      -- spec overwritten; one HMGET a page), or (`holds`(member) false) its lease gone,
      -- a member planted. Such a holder's outcome (flow_end) frees nothing and re-arms
      -- nothing, so a limiter or group waiting for it waited for good (probe33 F3):
      -- freed, its task runs on as the spec it has says (none: without limits). A page
      -- of them is checked (SSCAN COUNT VACATE_PAGE, from a place in the set chosen by the clock,
      -- `seed`: any number is one), and while a whole page held none and the set is
      -- full still, the next, VACATE_ROUNDS at most: a call costs the same with ten
      -- members or 200,000 planted ones (SMEMBERS read them all, at every fetch; a
      -- sample by SRANDMEMBER costs Redis 7.0 about 15 random picks a member). Those
      -- found are removed, said in one line of Redis's log. Returns the slots held
      -- then, and whether any was freed (the caller comes back at once for more; a
      -- full set of live holders waits for an outcome: no polling). Made at its first
      -- use: no call that meets no full set makes it.
      -- (a page of a sparse set can hold none: SSCAN walks a bounded run of empty
      -- buckets; such pages count only towards VACATE_CALLS, or a sample of thin
      -- pages found no ghost where 137 were left, and the limiter stopped for good)
      local VACATE_PAGE, VACATE_ROUNDS, VACATE_CALLS = 16, 4, 32
      local function vacate(running, held, most, holds, seed, flow, frees)
        local freed, first, rounds = 0, nil, 0
        local at = string.format('%d', (tonumber(seed) or 0) % 16777216)
        for _ = 1, VACATE_CALLS do
          local page = tolerant(false, 'SSCAN', running, at, 'COUNT', VACATE_PAGE)
          if not page then break end
          local gone = {}
          -- (a flow of another type holds no spec: every outcome frees nothing)
          local specs = page[2][1] and tolerant({}, 'HMGET', flow, unpack(page[2]))
          for i, member in ipairs(page[2]) do
            if not (frees(specs[i]) and holds(member)) then gone[#gone + 1] = member end
          end
          if gone[1] then
            tolerant(0, 'SREM', running, unpack(gone))
            freed, first = freed + #gone, first or gone[1]
          end
          if page[2][1] then rounds = rounds + 1 end
          if #gone < #page[2] or held - freed < most or rounds >= VACATE_ROUNDS then break end
          at = page[1]
        end
        if freed == 0 then return held, false end
        redis.log(redis.LOG_WARNING, (string.gsub(
          'minitask: freed ' .. freed .. ' slot(s) of ' .. running .. ' held by no task that'
          .. ' holds one (first: ' .. string.sub(first, 1, 64) .. '): not minitask\'s, or its'
          .. ' flow spec lost (its outcome would free none)',
          '[^ -~]', function(byte) return string.format('\\x%02x', string.byte(byte)) end)))
        return held - freed, true
      end
      rawset(made, 'vacate', vacate)
      return vacate
    end
    if rawget(made, 'admit') then return nil end
    -- Starts a window from which a rate is paced alone, without a log (above)
    local PACED_FROM = 500

    -- A pace read from `key`, or nil (none) for one further than `most` ms past `now`
    -- (or not a number): a start sets the pace at most a gap and a half-guard past
    -- its own now, so a pace further out is data minitask did not write, and obeyed
    -- it would hold the limiter's tasks back for as long (a year 5138 in ms). Ignored,
    -- it is overwritten by the next start; Redis's log says so.
    local function flow_pace(pace, now, most, key)
      if pace and not (pace <= now + most) then
        redis.log(redis.LOG_WARNING, 'minitask: ignored the flow pace ' .. tostring(pace)
                  .. ' of ' .. key .. ', more than ' .. most .. ' ms after now (' .. now
                  .. '): not one minitask wrote')
        return nil
      end
      return pace
    end

    -- Whether the task `id` of `spec` may start at `now`: true (its slot taken and
    -- its start counted), or false and when to try again (ms; -1: when a slot frees).
    -- `flow`: the flow hash, where a holder's spec says its outcome frees its slot.
    local function flow_admit(prefix, spec, id, now, leases, flow)
      local running, starts, paced
      if spec.most > 0 then
        running = prefix .. spec.limiter .. ':running'
        local held = tolerant(0, 'SCARD', running)
        if held >= spec.most then
          -- a member whose lease is gone (data another hand removed, an id planted),
          -- or whose spec no longer names this limiter with a max_running (lost: its
          -- outcome frees none, flow_end's read), frees its slot: a sample of them
          -- checked (flow_made.vacate); with some freed and the set full still, tried
          -- again at once (to check more of them)
          local freed
          held, freed = flow_made.vacate(running, held, spec.most, function(member)
            return tolerant(false, 'ZSCORE', leases, member)
          end, now, flow, function(text)
            return type(text) == 'string'
                   and string.match(text, HOLDS_LIMITER) == spec.limiter
          end)
          -- (more holders than it allows: ghosts the sample missed, looked for again in
          -- a second; a limiter held back by them silently stopped for good)
          if held >= spec.most then
            return false, freed and now or held > spec.most and now + 1000 or -1
          end
        end
      end
      local rated = spec.count > 0 and spec.window > 0
      -- the window and its guard (4 %, at most 250 ms)
      local span = rated and spec.window + math.min(math.floor(spec.window / 25), 250) or 0
      local gap, pace, due, turn = 0, nil, now, now
      if rated and spec.count >= PACED_FROM then
        paced = prefix .. spec.limiter .. ':pace'
        local tolerance = (span - spec.window) / 2
        gap = (span + tolerance) / (spec.count - 1)
        pace = tolerant(0, 'GET', paced)  -- 0: a key of another type, neither read nor written
        if pace == 0 then
          paced = nil
        else
          pace = flow_pace(tonumber(pace), now, gap + span, paced)
          if pace and pace - tolerance > now then return false, math.ceil(pace - tolerance) end
        end
      elseif rated then
        starts = prefix .. spec.limiter .. ':starts'
        gap = spec.window / spec.count
        -- a start is logged at its due time, at most now, and the pace at most a gap
        -- and a span ahead (flow_pace): an entry later than that is data minitask did
        -- not write, and counted it would hold the limiter's tasks until its date
        local ahead = tolerant(0, 'ZREMRANGEBYSCORE', starts, '(' .. (now + gap + span), '+inf')
        if ahead > 0 then
          redis.log(redis.LOG_WARNING, 'minitask: removed ' .. ahead .. ' flow start(s) of '
                    .. starts .. ' dated more than ' .. (gap + span) .. ' ms after now ('
                    .. now .. '): not ones minitask wrote')
        end
        local held = tolerant(0, 'ZCARD', starts)
        -- the count-th newest start (the pace scores highest): the window had room
        -- from span after it, whether or not the trim below removes it
        local room = 0
        if held > spec.count then
          local nth = -1 - spec.count
          room = (tonumber(tolerant({}, 'ZRANGE', starts, nth, nth, 'WITHSCORES')[2]) or 0) + span
        end
        held = held - tolerant(0, 'ZREMRANGEBYSCORE', starts, '-inf', now - span)
        pace = flow_pace(tonumber(tolerant(false, 'ZSCORE', starts, '')), now, gap + span, starts)
        local counted = held - (pace and 1 or 0)
        -- no start before its turn (starts spaced evenly), nor before the window has
        -- room; a start up to half a pace (at least the clock's 1 ms) after the time
        -- it was let in sets the next turn from that time, not from its own, so that
        -- late wake-ups do not slow the rate down
        local slack = math.max(gap / 2, 1)
        local at = math.max(pace or 0, room)
        if counted >= spec.count then
          -- the pace scores highest: the first member is the oldest start
          local oldest = tonumber(tolerant({}, 'ZRANGE', starts, 0, 0, 'WITHSCORES')[2])
          if oldest and oldest + span > at then at = oldest + span end
        end
        if at > now then return false, math.ceil(at) end
        if pace then turn = math.max(at, now - slack) end
        -- a start later than it was due (a worker waking late) counts from when it was
        -- due, by half the guard at most: late wake-ups do not add up window after
        -- window, and starts stay a window and half the guard apart
        if pace then due = math.max(room, pace - slack, now - (span - spec.window) / 2) end
      end
      if running then flow_put('set', 'SADD', running, id) end
      if paced then
        -- kept a span past the next start (as a log would be): a missing pace allows a
        -- start at once, so it outlives its turn on any caller's clock
        local next_start = math.max(pace or 0, now) + gap
        redis.call('SET', paced, next_start, 'PX', math.ceil(next_start - now + span))
      elseif starts then
        flow_put('zset', 'ZADD', starts, due, now .. ':' .. id, turn + gap, '')
        tolerant(0, 'PEXPIRE', starts, math.ceil(span + gap))
      end
      return true
    end

    -- Fair queues meeting data minitask did not write where a grouped task goes (its
    -- group's ready set, turn or slots, a ready list its token goes to, a park list):
    -- the key is moved aside (quarantined) to `key`:foreign (or :foreign2, up to
    -- :foreign100, which a 101st replaces: a call never fails half-way), kept whole for
    -- its owner, with a line in Redis's log naming both and the `group`; the write then
    -- goes on, so no task is dropped.
    local function flow_quarantine(key, kind, group)
      guards().aside(key, guards().held_other(kind) .. ' for group ' .. group)
    end

    -- Fair queues with flow control: whether the task's own limits (rate_limit,
    -- max_running, per limit_key: its limiter) hold a grouped task whose group's
    -- limits allow it to start. They hold every group of the task alike, so the group
    -- waits in the limiter's park list (its token, still live, parked by the fetch) and
    -- is served again as the limiter's parked tasks are: when a slot frees or the rate
    -- allows, in order. nil: no such limit, or it allows the start (counted); else
    -- {limiter, when to try again (ms; -1: when a slot frees)}. A start the task's
    -- limits refuse still counts against the group's rate (on the safe side).
    local function flow_held_by_task(c, spec, id)
      if spec.limiter == '' or (spec.expires > 0 and tonumber(c.now) >= spec.expires) then
        return nil
      end
      local free, retry_at = flow_admit(c.prefix, spec, id, c.clock(), c.leases, c.flow)
      if free then return nil end
      return {spec.limiter, retry_at}
    end

    made.admit, made.quarantine = flow_admit, flow_quarantine
    made.held_by_task = flow_held_by_task
    return rawget(made, name)
  end

  -- fair_made: flow_fair's library once made (false: a read that finds it must not
  -- call flow_limits)
  flow_made = setmetatable({spec = flow_spec, finish = flow_end, fair = flow_fair,
                            write = flow_write, put = flow_put, fair_made = false},
                           {__index = flow_limits})
  return flow_made
end

