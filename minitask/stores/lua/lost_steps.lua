-- lost_steps: of workflow steps a spawn call did not send (their marker was there),
-- those that are nowhere: the marker says "sent", yet the queue holds neither the
-- step's message (pending, running, scheduled, retrying or dead) nor its result. Such
-- a step either never ran (a marker minitask did not write, or a step purged) or ran
-- and left nothing (it kept no result, or its result was forgotten): the caller tells
-- them apart by what follows the step (a step that ran sent it before its ack, so
-- before its message went), in three steps: this look (ARGV[1] '0'), then what follows
-- each step found, then this again writing (ARGV[1] '1') for the steps whose
-- successors were never sent. Nothing is sent: a step runs at most once. A step whose
-- message or result is there, or whose marker says cancelled, holds none or is not
-- minitask's, is left as it is.
-- KEYS[1] messages (HASH)
-- KEYS[2i] marker (HASH: state) and KEYS[2i + 1] result (LIST) of the i-th step
-- ARGV[1] '1': write each found step's outcome; '0': look only
-- ARGV per step three, from ARGV[2]: id, the encoded outcome ('': none written, the
--   step keeps no result: ignore_result), its ttl (ms)
-- Returns: the ids of the steps found nowhere (their outcome written when ARGV[1] is '1').
-- Invariant: a step once found nowhere stays so (its message gone is never sent again,
-- its marker kept), so the writing call finds what the look found, unless an outcome
-- was written in between.
-- Data minitask did not write (lib.lua): a marker of another type counts as none,
-- messages of another type as holding the step (spawn.lua refused it before), a
-- result key of any type as the step's result: each is left as it is.
local lost = {}
local write = ARGV[1] == '1'
for i = 1, (#ARGV - 1) / 3 do
  local marker, result = KEYS[2 * i], KEYS[2 * i + 1]
  local id, outcome = ARGV[3 * i - 1], ARGV[3 * i]
  if tolerant(false, 'HGET', marker, 'state') == 'sent'
     and tolerant(1, 'HEXISTS', KEYS[1], id) == 0
     and redis.call('EXISTS', result) == 0 then
    lost[#lost + 1] = id
    if write and outcome ~= '' then
      redis.call('RPUSH', result, outcome)
      redis.call('PEXPIRE', result, ARGV[3 * i + 1])
    end
  end
end
return lost
