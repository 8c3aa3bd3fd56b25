-- lost_steps: of workflow steps a spawn call did not send (their marker was there),
-- those that are nowhere: the marker says "sent", yet the queue holds neither the
-- step's message (pending, running, scheduled, retrying or dead) nor its result. A
-- marker minitask did not write (or a step purged, or its result forgotten) would
-- otherwise leave everything after the step waiting for ever, since no spawn sends a
-- step whose marker exists (spawn.lua): each such step gets its cancelled outcome here,
-- in the same step as the look, and the caller cancels what follows it. Nothing is
-- sent: a step runs at most once. A step whose message or result is there, or whose
-- marker says cancelled, holds none or is not minitask's, is left as it is.
-- KEYS[1] messages (HASH)
-- KEYS[2i] marker (HASH: state) and KEYS[2i + 1] result (LIST) of the i-th step
-- ARGV per step three: id, the encoded outcome ('': none written, the step keeps no
--   result: ignore_result, whose run leaves nothing), its ttl (ms)
-- Returns: the ids of the steps found nowhere.
-- Data minitask did not write (lib.lua): a marker of another type counts as none,
-- messages of another type as holding the step (spawn.lua refused it before), a
-- result key of any type as the step's result: each is left as it is.
local lost = {}
for i = 1, #ARGV / 3 do
  local marker, result = KEYS[2 * i], KEYS[2 * i + 1]
  local id, outcome = ARGV[3 * i - 2], ARGV[3 * i - 1]
  if tolerant(false, 'HGET', marker, 'state') == 'sent'
     and tolerant(1, 'HEXISTS', KEYS[1], id) == 0
     and redis.call('EXISTS', result) == 0 then
    lost[#lost + 1] = id
    if outcome ~= '' then
      redis.call('RPUSH', result, outcome)
      redis.call('PEXPIRE', result, ARGV[3 * i])
    end
  end
end
return lost
