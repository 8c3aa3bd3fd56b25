-- lib: what every script shares; stores/scripts.py puts this file in front of
-- each script (and of promote.lua, where a script calls it).
--
-- Data that minitask did not write. A script meets what minitask wrote, and
-- also what someone else may have put in its keys: a score that is no whole
-- number (1.5, -inf, inf), a member that is no id of a message, a count that
-- is no number, a key holding another type. Redis keeps the writes of a
-- script that fails part way (there is no rollback), so:
--  * every check that can refuse a call comes before the script's first write:
--    a refused or failed call changes nothing;
--  * entries are read tolerantly (each script's header says how), so none
--    fails every later call and the queue keeps flowing;
--  * a key holding another type is never deleted: it may be someone's data, or
--    another version's tasks. Where a script only reads it, it counts as empty.
--    Where a call that sends tasks must add to it, the call is refused
--    (WRONGTYPE, naming the key) before any write: the sender is told.
--    Where a script that records an outcome (ack, retry, bury, release,
--    end_cancelled, and the flow control they call) writes to it, the key is
--    moved aside whole (aside(): renamed to `key`:foreign, with a WARNING in
--    Redis's log naming both) before that write, and the write is made: an
--    outcome is never refused nor left unrecorded for data minitask did not
--    write, so no worker holds a task for ever retrying it.
--    Result keys are the exception: they only ever hold outcomes, which
--    minitask replaces whole, deleting one of another type.

-- The highest score minitask writes: 10 * MAX_MS + 9 (message.py), below 2^53.
local MAX_SCORE = 2534023007999999

-- The separator the send writes between a solo group's claim's generation and its
-- task (enqueue_group.lua's inline join, flow.lua's join()) for a task whose spec is
-- plain (no limit, expiry or group limit): ':' tells fetch.lua's fast path to lease
-- the task without reading its spec; any other spec gets '/', and its spec is read.
-- Every reader takes both forms (the fetch's fast path, flow.lua's claimed(),
-- unsolo() and serve(), enqueue_group.lua's join_set, cancel.lua, purge_ready.lua).
-- Written ':' from the first release (0.1.0) on: no release ever wrote '/' for a
-- plain spec. A later change of this format is made readers first (CHANGELOG.rst's
-- versioning policy): one release reads the new form, the next writes it.
-- tests/crash/test_fair_solo_claims_of_both_forms.py.
local PLAIN_SOLO_CLAIM = ':'

-- The guards against data minitask did not write (foreign, must, expect, fits,
-- whole, band_of, bump, recount, utf8, unrecorded; and countable, writable and
-- refused, against a write refused part way) are made by guards() at its first
-- call, as one table: every closure costs Redis about 1,000 instructions a call of a script, made and
-- collected whether it is called or not, and most calls of the hot scripts (fetch,
-- ack) meet no such data. Scripts call them as guards().must(...).
local guarded

local function guards()
  if guarded then return guarded end

  -- Keys expect() has found missing or of the type it asked for, this call.
  local proven = {}

  -- For the error reply of a redis.pcall: true when a key holds another type
  -- (WRONGTYPE). Any other error (OOM, NOPERM...) is raised as it is: OOM only
  -- ever refuses a script's first write, and NOPERM means an ACL without a
  -- command of the docs' ACL list (guide/scaling.rst). On the hot paths (enqueue, fetch, ack) scripts
  -- call redis.pcall and this only for an error reply, or must() again to
  -- refuse: a call through tolerant() or must() costs 0.1 us more, each.
  local function foreign(reply)
    if string.find(tostring(reply.err), 'WRONGTYPE', 1, true) then return true end
    error(reply.err, 0)
  end

  -- redis.call on `key`, which must be missing or hold a `kind` (list, zset,
  -- hash): a WRONGTYPE error names the key and the type it holds (TYPE, read only
  -- then). Called before any write, or as the first write.
  local function must(kind, command, key, ...)
    local reply = redis.pcall(command, key, ...)
    if type(reply) == 'table' and reply.err then
      if string.find(tostring(reply.err), 'WRONGTYPE', 1, true) then
        local held = redis.call('TYPE', key)
        error('WRONGTYPE minitask key ' .. key .. ' holds another type than the ' .. kind ..
              ' minitask keeps there (a ' .. tostring(type(held) == 'table' and held.ok or held)
              .. '); nothing was changed', 0)
      end
      error(reply.err, 0)
    end
    return reply
  end

  -- Refuse the call unless `key` is missing or holds a `kind`; called before the
  -- first write, for a key the script adds to only after it. LLEN, ZCARD and
  -- HEXISTS read in O(1) and need no ACL permission beyond the docs' ACL list.
  local function expect(key, kind)
    if proven[key] then return end
    if kind == 'list' then
      must(kind, 'LLEN', key)
    elseif kind == 'zset' then
      must(kind, 'ZCARD', key)
    else
      must(kind, 'HEXISTS', key, '')
    end
    proven[key] = true
  end

  -- Whether `key` is missing or holds a `kind` (list, zset, hash), as expect()
  -- asks, without refusing: for a script that skips what it cannot use (and
  -- says so in its reply) instead of failing a call that serves other keys.
  local function fits(key, kind)
    local reply
    if kind == 'list' then
      reply = redis.pcall('LLEN', key)
    elseif kind == 'zset' then
      reply = redis.pcall('ZCARD', key)
    else
      reply = redis.pcall('HEXISTS', key, '')
    end
    return not (type(reply) == 'table' and reply.err and foreign(reply))
  end

  -- Move `key` aside (quarantine it): renamed whole to `key`:foreign (or :foreign2, up
  -- to :foreign100, which a 101st replaces: a call never fails half-way), kept for its
  -- owner, with one WARNING in Redis's log naming both and `why` (the kind minitask
  -- keeps there, by default); returns the name it was moved to. The scripts that record
  -- outcomes call it for a key of another type they write to (settle(), displaced()),
  -- then write: the outcome is recorded.
  local function aside(key, why)
    local moved
    for n = 1, 100 do
      moved = key .. ':foreign' .. (n > 1 and n or '')
      if redis.call('EXISTS', moved) == 0 then break end
    end
    redis.call('RENAME', key, moved)
    redis.log(redis.LOG_WARNING, 'minitask: moved ' .. key .. ' aside to ' .. moved .. ': ' .. why)
    return moved
  end

  local function held_other(kind)
    return 'it held another type than the ' .. kind .. ' minitask keeps there'
  end

  -- Before a script's first write to `key`, where minitask keeps a `kind` (list, zset,
  -- hash, set, stream, string: TYPE's names; TYPE reads in O(1)): one of another type
  -- is moved aside (aside()), so that the writes after find it missing.
  local function settle(key, kind)
    local held = redis.call('TYPE', key)
    held = type(held) == 'table' and held.ok or held
    if held ~= 'none' and held ~= kind then aside(key, held_other(kind)) end
  end

  -- For the error reply of a write to `key`, where minitask keeps a `kind`: a key of
  -- another type (the write's WRONGTYPE error changed nothing) is moved aside
  -- (aside()), for the write to be made again on the missing key (flow.lua's flow_put). Any
  -- other error is raised.
  local function displaced(reply, key, kind)
    foreign(reply)
    aside(key, held_other(kind))
  end

  -- `value` (a reply) as a whole number from `low` to `high`, or nil: text, nan,
  -- inf, a fraction or a number out of range is not one minitask wrote.
  local function whole(value, low, high)
    local n = tonumber(value)
    if n and n == n and n >= low and n <= high and n == math.floor(n) then return n end
    return nil
  end

  -- The ready list (its index in KEYS) for a delayed or lease `score`, given
  -- the index of the priority 9 list: score % 10 is 9 - priority. A score that
  -- is no whole number from 0 to MAX_SCORE (tonumber() also reads '1.5',
  -- '-inf', 'inf' and 'nan') is not ours: its priority cannot be told, and 0,
  -- the last served, is taken.
  local function band_of(score, first_ready)
    local n = tonumber(score)
    if n and n >= 0 and n <= MAX_SCORE and n == math.floor(n) then
      return first_ready + n % 10
    end
    return first_ready + 9
  end

  -- HINCRBY key field by, or INCR key without a field, on a count someone else
  -- may have written: text, or a number beyond 2^63, starts afresh (at `by`, or
  -- at 1). In a key of another type no count is kept: `by` (0 for INCR) is
  -- returned.
  local function bump(key, field, by)
    local count
    if field then
      count = redis.pcall('HINCRBY', key, field, by)
    else
      count = redis.pcall('INCR', key)
    end
    if not (type(count) == 'table' and count.err) then return count end
    local err = tostring(count.err)
    if string.find(err, 'WRONGTYPE', 1, true) then return field and by or 0 end
    if not (string.find(err, 'not an integer', 1, true)
            or string.find(err, 'overflow', 1, true)) then
      foreign(count)
    end
    if field then
      redis.call('HSET', key, field, by)
      return by
    end
    redis.call('DEL', key)
    return redis.call('INCR', key)
  end

  -- After `reply`, the error of an INCRBY `key` `by` on a count without a field (a
  -- total that is deleted at 0): the total itself, started afresh at `by` when it
  -- held no count minitask writes (text, 1e400, past 2^63; said in Redis's log),
  -- or nil for a key of another type (no count is kept, and the key is left as it is).
  local function recount(reply, key, by)
    local err = tostring(reply.err)
    if string.find(err, 'WRONGTYPE', 1, true) then return nil end
    if not (string.find(err, 'not an integer', 1, true)
            or string.find(err, 'overflow', 1, true)) then
      error(reply.err, 0)
    end
    redis.log(redis.LOG_WARNING, 'minitask: ' .. key .. ' held no count minitask wrote'
              .. ' (' .. err .. '): started afresh')
    redis.call('DEL', key)
    return redis.call('INCRBY', key, by)
  end

  -- Redis's own refusal of `command` (INCRBY, DECRBY) on the count `key`, raised before
  -- the first write of a call that lowers the count after it (an ACL without it, maybe
  -- taken away while workers run: refused after those writes, which Redis keeps, the
  -- count stayed too high for good). Asked (redis.acl_check_cmd, Redis 7.0 and later);
  -- on Redis 6.2 tried as `command` `key` 0 on a count that exists (lowering a missing
  -- count leaves none: deleted at 0 or below). Nothing when the user may run it.
  local function countable(command, key)
    if redis.acl_check_cmd then
      if redis.acl_check_cmd(command, key, '0') then return end
    elseif redis.call('EXISTS', key) == 0 then
      return
    end
    -- (its own error raised: Redis 7.0 words a script's refusal without NOPERM; a count
    -- that is no integer, or of another type, is the writer's to handle: recount())
    local tried = redis.pcall(command, key, '0')
    if type(tried) == 'table' then
      local err = tostring(tried.err)
      if not (string.find(err, 'WRONGTYPE', 1, true) or string.find(err, 'not an integer', 1, true)
              or string.find(err, 'overflow', 1, true)) then
        error(tried.err, 0)
      end
    end
  end

  -- Whether the error reply of a redis.pcall is the ACL's refusal, as each version
  -- words one inside a script: 6.2 and 7.0 "The user executing the script can't...",
  -- 7.2 on (and Valkey) "ACL failure in script: ..."; NOPERM outside scripts only.
  local function refused(reply)
    local err = tostring(reply.err)
    return string.find(err, 'executing the script', 1, true) ~= nil
      or string.find(err, 'ACL failure in script', 1, true) ~= nil
      or string.find(err, 'NOPERM', 1, true) ~= nil
  end

  -- Redis's refusal of the write `command` `key` `...` (as the caller will send it),
  -- raised before the call's first write, so that a refusal changes nothing (refused
  -- part way, Redis keeps the writes before it: a task withdrawn with no outcome, an
  -- outcome with nothing cancelled). Asked (redis.acl_check_cmd): callers call it on
  -- Redis 7.0 and later only; 6.2 cannot be asked, and its ACL names commands, not
  -- commands by key: callers try a write that changes nothing there instead.
  local function writable(command, key, ...)
    if not redis.acl_check_cmd(command, key, ...) then
      error('NOPERM this user has no permissions to run the \'' .. string.lower(command) ..
            '\' command on key ' .. key .. ' (asked before any write: nothing was written)', 0)
    end
  end

  -- Whether `id` can be a task id: not empty, and UTF-8 (the worker reads ids as
  -- text). Anything else in a ready list is dropped; it is never poisoned.
  local function utf8(id)
    local i, n = 1, #id
    while i <= n do
      local c = string.byte(id, i)
      local size, low, high = 1, 0x80, 0xBF  -- low, high: the second byte's range
      if c >= 0xC2 and c <= 0xDF then
        size = 2
      elseif c >= 0xE0 and c <= 0xEF then
        size = 3
        if c == 0xE0 then low = 0xA0 elseif c == 0xED then high = 0x9F end  -- overlong, surrogate
      elseif c >= 0xF0 and c <= 0xF4 then
        size = 4
        if c == 0xF0 then low = 0x90 elseif c == 0xF4 then high = 0x8F end  -- overlong, > U+10FFFF
      elseif c >= 0x80 then
        return false
      end
      if i + size - 1 > n then return false end
      for j = i + 1, i + size - 1 do
        local b = string.byte(id, j)
        if b < 0x80 or b > 0xBF or (j == i + 1 and (b < low or b > high)) then return false end
      end
      i = i + size
    end
    return true
  end

  -- After the error reply of an XADD of `entry` to a queue's record of recent outcomes
  -- (`key`, trimmed to about `cap` entries): a record no minitask wrote is moved aside
  -- (aside()) and the entry added to a new one, so that an outcome is never refused
  -- nor left out for it: one of another type, or a stream whose last ID is the last
  -- possible one (minitask's IDs are the server's time: planted). Any other error is
  -- raised.
  local function rerecord(reply, key, cap, entry)
    if string.find(tostring(reply.err), 'last possible ID', 1, true) then
      aside(key, 'its last entry ID is the last possible one, which minitask never writes')
    else
      displaced(reply, key, 'stream')
    end
    redis.call('XADD', key, 'MAXLEN', '~', cap, '*', 'e', entry, 'n', cap)
  end

  guarded = {foreign = foreign, must = must, expect = expect, band_of = band_of, bump = bump,
             utf8 = utf8, fits = fits, whole = whole, recount = recount, countable = countable,
             writable = writable, refused = refused,
             rerecord = rerecord, aside = aside, settle = settle,
             displaced = displaced, held_other = held_other}
  return guarded
end

-- redis.call on a key that may hold another type: `instead` if it does, as
-- if the key were empty.
local function tolerant(instead, command, key, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply.err then
    guards().foreign(reply)
    return instead
  end
  return reply
end

-- Entries a script popped from `list` (a ready list, a park list) and did not serve,
-- put back at its head in their order (entries[1] first) when a command after the
-- pop was refused (an ACL changed while the worker runs: Redis keeps what the script
-- wrote before; fetch.lua); with LPUSH the one refused, at its tail (their order
-- kept, their place lost: never the entries). redis.pcall: a refusal of these pushes
-- too must not hide the first, which the caller raises after.
local function put_back(list, entries)
  local n = #entries
  if n == 0 then return end
  local pushed
  if n == 1 then
    pushed = redis.pcall('LPUSH', list, entries[1])
  else
    local reversed = {}  -- (LPUSH puts its last argument at the head)
    for i = n, 1, -1 do reversed[#reversed + 1] = entries[i] end
    pushed = redis.pcall('LPUSH', list, unpack(reversed))
  end
  if type(pushed) == 'table' then redis.pcall('RPUSH', list, unpack(entries)) end
end

-- Add `entry` to a queue's record of recent outcomes (`key`, a STREAM), trimmed
-- as it is written to its newest `cap` entries and at most one stream node more
-- (MAXLEN ~: whole nodes dropped, a third of the instructions of an exact trim at a
-- cap of 2,000, which walks the first node's deleted entries), with the cap as field
-- n, by which a listing (recent_page.lua) shows the newest `cap` only: one command.
-- An empty entry (the record is off, or the outcome is not one kept) writes
-- nothing. A record of another type, or one whose last ID is the last possible one,
-- is moved aside first (guards().rerecord).
local function remember(key, cap, entry)
  if entry == '' then return end
  local added = redis.pcall('XADD', key, 'MAXLEN', '~', cap, '*', 'e', entry, 'n', cap)
  if type(added) == 'table' and added.err then guards().rerecord(added, key, cap, entry) end
end

-- Refuse the call unless `key` is missing or holds a `kind` (list, zset, hash), as
-- guards().expect() does, with guards() made only to refuse (its closures cost a call
-- of a hot script, spawn.lua's, more than the read): true, for the caller's record of
-- the keys it checked.
local function unless_other(key, kind)
  local reply
  if kind == 'hash' then
    reply = redis.pcall('HEXISTS', key, '')
  else
    reply = redis.pcall(kind == 'list' and 'LLEN' or 'ZCARD', key)
  end
  if type(reply) == 'table' then guards().expect(key, kind) end
  return true
end

-- A workflow step's marker (spawn.lua, spawn_flow.lua), checked before any write:
-- one of another type, or with a state minitask does not write (sent, cancelled),
-- is not minitask's and refuses the call (read as "sent", its step would never be
-- sent, with not a word). Returns the state (sent, cancelled) or false (none).
-- (One HGET: a marker of another type fails it, and must() refuses, naming its type.)
local function step_marker(marker)
  local state = redis.pcall('HGET', marker, 'state')
  if type(state) == 'table' then state = guards().must('hash', 'HGET', marker, 'state') end
  if state and state ~= 'sent' and state ~= 'cancelled' then
    error('WRONGTYPE minitask key ' .. marker .. ' holds no step marker minitask wrote ' ..
          '(its state is neither sent nor cancelled); nothing was changed', 0)
  end
  return state  -- sent or cancelled: the step is not sent (again); false: it may be
end

-- A listing's reply `listed` of `key` (`step` 2: member, score or field, value pairs;
-- 1: members alone), kept to the members no longer than `most` (the longest minitask
-- writes there: an id, wire.message.MAX_ID_BYTES; a group's name; a queue, worker or
-- subscriber name). A longer one (planted: a 50 MB id made the dashboard's dead letters
-- page 262 MB) is never sent: it is removed by `command` (ZREM when none is given; SREM
-- for a set, HDEL for a hash: a key minitask alone writes, so that it costs one call,
-- not every listing), and its length added to `removed`, for the caller's log. Returns
-- the members kept, in their order.
local function bounded_members(key, listed, step, most, removed, command)
  local kept = listed
  for i = 1, #listed, step do
    if #listed[i] > most then
      if kept == listed then
        kept = {}
        for j = 1, i - 1 do kept[j] = listed[j] end
      end
      -- (refused, a replica: left, and still not sent)
      redis.pcall(command or 'ZREM', key, listed[i])
      removed[#removed + 1] = #listed[i]
    elseif kept ~= listed then
      for j = i, i + step - 1 do kept[#kept + 1] = listed[j] end
    end
  end
  return kept
end
