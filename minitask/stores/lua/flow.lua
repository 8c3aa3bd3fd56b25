-- flow: flow control (docs/guide/flow-control.rst), a library put in front of
-- the scripts that hand tasks out or end them (stores/scripts.py). A task with
-- limits or an expiry has a spec in the queue's flow hash (id -> spec; limits.py
-- packs it), text lines:
--   limiter, rate count, rate window (ms), max running, expires (ms; 0: never),
--   debounce (0 or 1)
-- The limiter (empty: no limits) names one task and limit key; its state lives
-- under the queue's hash tag, at names built from the flow prefix (keys.py):
--   <prefix><limiter>:park     LIST  parked entries (priority digit .. id), oldest first
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
-- paced one every window / count. So that a worker waking late does not slow the
-- rate down: half a pace of slack (1 ms at least), and a start later than it was
-- due counts from when it was due, by half the guard at most (late wake-ups would
-- otherwise add up, window after window); starts stay at least a window and half
-- the guard apart.
-- A rate of PACED_FROM or more starts a window keeps no log (it would hold up to
-- `count` entries, and cost a sorted-set write per start): it is paced alone, one
-- start every (span + tolerance) / (count - 1), span being the window and its guard,
-- a start allowed up to the tolerance (half the guard) before its turn. Then n starts
-- in any span satisfy (n - 1) * pace - tolerance <= span, so n <= count: the same
-- strict bound, at count - 1 starts a span and a half guard, 94 % of a per-second
-- rate or more.
-- Data minitask did not write (lib.lua): a spec that does not parse is no limit; a
-- limiter key of another type counts as empty, and writes to it are skipped; a pace
-- further out than a start ever sets it (a gap and a span past now) is ignored,
-- with a line in Redis's log.

-- The library is made by flow_control() at its first call, as one table: a
-- closure costs Redis about 1,000 instructions a call of a script, made and
-- collected whether it is called or not, and most queues have no flow control
-- (lib.lua's guards() likewise). Scripts call flow_control().spec(...), .admit(...)
-- and .finish(...).
local flow_made

local function flow_control()
  if flow_made then return flow_made end

  -- A field of a spec as a number: most are 0, told without a tonumber (which costs
  -- Redis about 1,500 instructions)
  local function flow_number(text)
    if text == '0' then return 0 end
    return tonumber(text)
  end

  local function flow_spec(text)
    if type(text) ~= 'string' then return nil end
    local limiter, count, window, most, expires = string.match(
      text, '^([^\n]*)\n(%d+)\n(%d+)\n(%d+)\n(%d+)\n')
    if not limiter then return nil end
    return {limiter = limiter, count = flow_number(count), window = flow_number(window),
            most = flow_number(most), expires = flow_number(expires)}
  end

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
  local function flow_admit(prefix, spec, id, now, leases)
    local running, starts, paced
    if spec.most > 0 then
      running = prefix .. spec.limiter .. ':running'
      local held = tolerant(0, 'SCARD', running)
      if held >= spec.most then
        -- a member whose lease is gone (data another hand removed) frees its slot here
        for _, member in ipairs(tolerant({}, 'SMEMBERS', running)) do
          if not tolerant(false, 'ZSCORE', leases, member) then
            tolerant(0, 'SREM', running, member)
            held = held - 1
          end
        end
        if held >= spec.most then return false, -1 end
      end
    end
    local rated = spec.count > 0 and spec.window > 0
    -- the window and its guard (4 %, at most 250 ms)
    local span = rated and spec.window + math.min(math.floor(spec.window / 25), 250) or 0
    local gap, pace, due = 0, nil, now
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
      -- half a pace of slack, and at least the clock's 1 ms: a rate above 1,000/s
      -- starts several tasks in one ms
      local slack = math.max(gap / 2, 1)
      local at = 0
      if pace and pace - slack > now then at = pace - slack end
      if counted >= spec.count then
        -- the pace scores highest: the first member is the oldest start
        local oldest = tonumber(tolerant({}, 'ZRANGE', starts, 0, 0, 'WITHSCORES')[2])
        if oldest and oldest + span > at then at = oldest + span end
      end
      if at > now then return false, math.ceil(at) end
      -- a start later than it was due (a worker waking late) counts from when it was
      -- due, by half the guard at most: late wake-ups do not add up window after
      -- window, and starts stay a window and half the guard apart
      if pace then due = math.max(room, pace - slack, now - (span - spec.window) / 2) end
    end
    if running then tolerant(0, 'SADD', running, id) end
    if paced then
      -- kept a span past the next start (as a log would be): a missing pace allows a
      -- start at once, so it outlives its turn on any caller's clock
      local next_start = math.max(pace or 0, now) + gap
      redis.call('SET', paced, next_start, 'PX', math.ceil(next_start - now + span))
    elseif starts then
      tolerant(0, 'ZADD', starts, due, now .. ':' .. id, math.max(pace or 0, now) + gap, '')
      tolerant(0, 'PEXPIRE', starts, math.ceil(span + gap))
    end
    return true
  end

  -- Free the max_running slot `id` holds under `limiter`, if any, and have the
  -- limiter's parked tasks tried at once (a wake token rouses a waiting worker).
  local function flow_free(prefix, due, wake, limiter, id)
    if tolerant(0, 'SREM', prefix .. limiter .. ':running', id) == 1
       and tolerant(0, 'LLEN', prefix .. limiter .. ':park') > 0 then
      tolerant(0, 'ZADD', due, 0, limiter)
      tolerant(0, 'RPUSH', wake, '1')
    end
  end

  -- flow_free for each of `ids` that has a spec; `forget`: drop their specs too (the
  -- task has ended). One HMGET when none of them has a spec.
  local function flow_end(flow, prefix, due, wake, ids, forget)
    local specs, found = tolerant({}, 'HMGET', flow, unpack(ids)), false
    for i, id in ipairs(ids) do
      if specs[i] then
        found = true
        -- the limiter of a spec whose max_running is above 0 (written without a
        -- leading zero): all an outcome needs, read without parsing the whole spec
        -- (one capture, no numbers: a fifth of the instructions of a whole parse)
        local limiter = string.match(specs[i], '^([^\n]+)\n%d+\n%d+\n[1-9]')
        if limiter then flow_free(prefix, due, wake, limiter, id) end
      end
    end
    if forget and found then tolerant(0, 'HDEL', flow, unpack(ids)) end
  end

  flow_made = {spec = flow_spec, admit = flow_admit, finish = flow_end}
  return flow_made
end
