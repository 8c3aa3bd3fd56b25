"""Sending a workflow's script calls so that one refused leaves nothing of the others.

A workflow is sent by one script call per queue it touches (and per ``SPAWN_CHUNK``
steps), with a ``group_create`` call per queue keeping the state of its groups (a
chord's header). Each call is atomic, and each spawn call checks the keys it writes
before its first write (``spawn.lua``: a key of another type refuses it, naming the
key, with nothing written), but the calls together are not atomic (on Redis Cluster
each queue is its own slot). So:

* the groups kept in the queue of a workflow's one spawn call (a chord in one queue)
  are created by that call (``spawn_group.lua``), after its checks: a refused chord
  left its group's state behind, waiting for members never sent, until its ttl;
* a workflow still sent in more than one call first runs ``spawn_check.lua`` once per
  queue, in one round trip, which refuses, naming the key, with nothing written: a
  call refused after another's steps were queued left those to run (a caller who
  retried ran them twice). ``group_create`` refuses nothing (a group's key that exists,
  of any type, is left as it is), so the spawn calls' checks are the calls' checks.

``spawn_call`` makes each spawn call (its layout is known here alone: ``with_groups``
adds to it). Someone planting a key between the check and the sending is not covered.

A step whose marker was there is not sent (it was, or it was cancelled): when a call
sends fewer steps than it was given, ``lost_steps`` looks for those found nowhere.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ..broker.packing import ScriptCall
from ..broker.transport import Transport, text
from ..broker.keys import QueueKeys
from ..errors import BrokerError
from ..printable import own_logger
from ..wire.message import Outcome
from ..wire.serializer import encode_outcome
from .foreign import foreign
from .queue import BATCH_LIMIT, WAKE_CAP, after_write
from .step_ids import nothing_sent

logger = own_logger(__name__)

#: A step as stores.workflows gathers it: (id, body, priority, due ms, ttl, flow spec).
Step = Tuple[str, bytes, int, int, int, Any]


def spawn_call(k: QueueKeys, queue: str, chunk: Sequence[Step],
               record: Optional[Tuple[str, bytes, int]], plan: bytes, wid: str,
               now_ms: int) -> ScriptCall:
    """The script call sending ``chunk``, steps of ``queue`` (``k``: its keys), with the
    handle ``record`` (id, packed, ttl ms) and its ``plan`` record, if given; ``wid``: the
    steps' workflow. Steps with limits or a group (fair queues) make it spawn_flow.lua's,
    which adds their specs (and joins their groups) to spawn.lua's sending."""
    tail: List[Any] = []
    for task_id, _, _, _, _, _ in chunk:
        tail += (k.result(task_id), k.once(task_id))
    if record is not None:
        tail.append(k.handle(record[0]))
    if record is not None and plan:
        tail.append(k.workflow(record[0]))
    keys = 2 * len(chunk) + (record is not None) + bool(plan)
    flowing = any(step[5] is not None for step in chunk)
    if flowing:
        tail += (k.flow, k.leases, k.dead, k.cancelled, k.flow_prefix)
        keys += 5
    tail += (now_ms, WAKE_CAP, BATCH_LIMIT, *((record[2], record[1]) if record else (0, b"")),
             plan, wid)
    for task_id, body, priority, due_ms, ttl, _ in chunk:
        tail += (task_id, body, priority, due_ms, ttl)
    if flowing:
        tail += [step[5] or "" for step in chunk]
        tail.append(len(chunk))
    return ("spawn_flow" if flowing else "spawn", queue,
            (k.messages, k.delayed, k.wake, *k.ready, k.order, k.sequence), tail, keys)


def check_calls(keys: Any, steps: Dict[str, List[Step]], now_ms: int) -> List[ScriptCall]:
    """One ``spawn_check`` call per queue of ``steps`` (``keys``: a queue's keys)."""
    calls: List[ScriptCall] = []
    for queue, queued in steps.items():
        k: QueueKeys = keys(queue)
        later = any(step[3] > now_ms for step in queued)
        priorities = sorted({step[2] for step in queued if step[3] <= now_ms})
        calls.append(("spawn_check", queue, (k.messages, k.delayed, k.wake, *k.ready),
                      [*(k.once(step[0]) for step in queued), "1" if later else "0",
                       *priorities], len(queued)))
    return calls


def with_groups(calls: Sequence[ScriptCall]) -> List[ScriptCall]:
    """``calls`` with the ``group_create`` call of the queue of the only spawn call, if
    there are both, made part of that call (``spawn_group.lua``: its keys after the
    spawn's, its arguments after the spawn's, then how many groups and whether the
    spawn is ``spawn_flow``'s)."""
    spawns = [call for call in calls if call[0] != "group_create"]
    groups = [call for call in calls if call[0] == "group_create" and spawns
              and call[1] == spawns[0][1]]
    if len(spawns) != 1 or not groups:
        return list(calls)
    (name, queue, static, tail, dynamic), (_, _, _, created, count) = spawns[0], groups[0]
    merged: ScriptCall = ("spawn_group", queue, static,
                          [*tail[:dynamic], *created[:count], *tail[dynamic:],
                           *created[count:], count, "1" if name == "spawn_flow" else "0"],
                          dynamic + count)
    return [call if call is not groups[0] else merged for call in calls
            if call is not spawns[0]]


def send_steps(transport: Transport, keys: Any, steps: Dict[str, List[Step]], now_ms: int,
               calls: Sequence[ScriptCall],
               register: Callable[[Iterable[str]], None]) -> List[str]:
    """Run a workflow's ``calls`` (``with_groups``), checked first (``spawn_check``)
    when they are more than one (not atomic together), then ``register`` the queues of
    ``steps``: a call refused wrote nothing, nor does the registry. Returns the ids of
    the steps not sent because their marker was there (the spawn scripts say which).

    Raises:
        BrokerError: Redis failed, or refused a key of another type, naming it; then
            nothing was written (``sent`` False: a lost reply of the checks, which write
            nothing, too). ``sent``: the steps may have been written (a lost reply, a
            command refused inside a spawn script), or were (``written``: the registry
            failed after them).
    """
    calls = with_groups(calls)
    what = f"{sum(map(len, steps.values()))} workflow step(s)"
    if len(calls) > 1 and steps:
        with nothing_sent():  # the checks write nothing: their lost reply is no "maybe"
            transport.run_calls(check_calls(keys, steps, now_ms),
                                f"check the queues of {what} before sending them")
    try:
        replies = transport.run_calls(calls, f"send {what}")
    except BrokerError as exc:
        if not foreign(exc):
            # written perhaps (unconfirmed, or the reply lost on the way): findable by id
            # all the same; the outage is what the caller hears, not the registry's
            with contextlib.suppress(BrokerError):
                register(steps)
        raise
    with after_write():  # the steps are written: a registry refused is no "could not"
        register(steps)
    return [str(text(task_id)) for call, reply in zip(calls, replies)
            if call[0] != "group_create" and isinstance(reply, list) for task_id in reply[1:]]


#: What a step that ran left of what follows it: ("marker", queue, id) of a step it
#: sent (its marker's state), or ("join", queue, group id, index) of the group it joined.
Trace = Tuple[Any, ...]


def traces_of(follow: Optional[Dict[str, Any]]) -> Optional[List[Trace]]:
    """Where a step followed by ``follow`` (a frame's continuation) left a trace of
    having run: it sends what follows it (or joins its group) before its ack, so before
    its message goes. [] for a last step (nothing follows it); None when it cannot be
    told (an empty group follows): such a step is never taken for lost."""
    if follow is None:
        return []
    if follow["k"] == "join":
        return [("join", follow["q"], follow["id"], follow["i"])]
    return _firsts(follow["node"]) or None


def step_traces(skipped: Iterable[str],
                follows: Dict[str, Tuple[Dict[str, Any], Optional[Dict[str, Any]]]]
                ) -> Dict[str, List[Trace]]:
    """By id, the traces (``traces_of``) of the ``skipped`` steps that can be told lost
    (``follows``: by id, a step's node and what follows it): not one whose trace cannot
    be told, nor a last ``ignore_result`` step (one that ran leaves nothing at all)."""
    traces: Dict[str, List[Trace]] = {}
    for task_id in skipped:
        node, follow = follows[task_id]
        found = traces_of(follow)
        if found is not None and (found or not node.get("ir")):
            traces[task_id] = found
    return traces


def _firsts(node: Dict[str, Any]) -> List[Trace]:
    """The markers of the first steps ``node`` sends (each member's, for a group)."""
    kind = node["k"]
    if kind == "t":
        return [("marker", node["q"], node["id"])]
    if kind == "c":
        return _firsts(node["steps"][0]) if node["steps"] else []
    members = node.get("members" if kind == "g" else "header") or []
    return [trace for member in members for trace in _firsts(member)]


def _ran(transport: Transport, keys: Any, traces: Dict[str, List[Trace]]) -> Set[str]:
    """Of ``traces`` (by step id), the steps that left one: a marker that says sent
    (delay()'s reservation says nothing; one that says cancelled was cancelled, by
    ``cancel()`` before it was sent or with a step before it that ended: no sign that
    this step ran, and what follows it waits for this one's worker to cancel it), or a
    group that is gone, fired, failed or holds the step's result. A key of another
    type counts as a trace (it cannot be told: the step is left alone)."""
    asked: List[Tuple[str, int]] = []
    with transport.errors(f"read what follows {len(traces)} workflow step(s)"):
        pipe = transport.client.pipeline(transaction=False)
        for task_id, found in traces.items():
            for trace in found:
                k: QueueKeys = keys(trace[1])
                if trace[0] == "marker":
                    pipe.hget(k.once(trace[2]), "state")
                    asked.append((task_id, 1))
                else:
                    state = k.group(trace[2])
                    pipe.exists(state)
                    pipe.hexists(state, "fired")
                    pipe.hexists(state, "failed_index")
                    pipe.hexists(k.group_results(trace[2]), str(trace[3]))
                    asked.append((task_id, 4))
        replies = pipe.execute(raise_on_error=False) if asked else []
    ran: Set[str] = set()
    at = 0
    for task_id, count in asked:
        got = replies[at:at + count]
        at += count
        if any(isinstance(reply, Exception) for reply in got):
            ran.add(task_id)
        elif count == 1 and got[0] is not None and got[0] != b"cancelled":
            ran.add(task_id)
        elif count == 4 and (not got[0] or any(got[1:])):
            ran.add(task_id)
    return ran


def lost_steps(transport: Transport, keys: Any, steps: Dict[str, List[Step]],
               traces: Dict[str, List[Trace]], keeps_none: Callable[[str], bool],
               now_ms: int, chunk: int) -> Dict[str, str]:
    """Of ``steps`` (steps a spawn call did not send, their marker there), those lost:
    their marker says "sent" while their queue holds neither their message nor their
    result (``lost_steps.lua``), and nothing that follows them was sent (``traces``, by
    id: ``traces_of``; a step absent from it is not looked at). A step that ran sent
    what follows it before its ack, so one nowhere whose successors were sent ran (kept
    no result, or its result expired or was forgotten) and is left as it is; one whose
    successors were not sent (one cancelled was not) never ran (a marker minitask did
    not write, or a step purged before it ran). Each lost step gets a cancelled
    outcome naming its marker, unless ``keeps_none`` of its id (ignore_result);
    nothing is sent again. Returns, by
    id, why, for the caller to cancel what follows each (it would wait for ever).
    ``chunk``: steps a call at most.

    Raises:
        BrokerError: Redis failed.
    """
    why: Dict[str, str] = {}
    asked: Dict[str, List[Tuple[str, bytes, int]]] = {}
    for queue, queued in steps.items():
        k: QueueKeys = keys(queue)
        for task_id, _, _, _, ttl, _ in queued:
            if task_id not in traces:
                continue
            why[task_id] = (f"its step marker {k.once(task_id)} says it was sent, but queue "
                            f"{queue!r} holds neither its message nor its result, and "
                            f"nothing that follows it was sent: a marker minitask did not "
                            f"write (or the step was purged); it is not sent again")
            outcome = b"" if keeps_none(task_id) else encode_outcome(Outcome(
                "cancelled", now_ms, exc_type="Cancelled", message=f"not run: "
                f"{why[task_id]}", reason="its step marker says sent, yet it is nowhere"))
            asked.setdefault(queue, []).append((task_id, outcome, ttl))

    def look(write: str, among: Set[str]) -> Set[str]:
        calls: List[ScriptCall] = []
        for queue, found in asked.items():
            k: QueueKeys = keys(queue)
            found = [step for step in found if step[0] in among]
            for start in range(0, len(found), chunk):
                tail: List[Any] = []
                argv: List[Any] = []
                for task_id, outcome, ttl in found[start:start + chunk]:
                    tail += (k.once(task_id), k.result(task_id))
                    argv += (task_id, outcome, ttl)
                calls.append(("lost_steps", queue, (k.messages,), [*tail, write, *argv],
                              len(tail)))
        if not calls:
            return set()
        replies = transport.run_calls(calls, f"look for {len(among)} workflow step(s) "
                                             f"not sent")
        return {str(text(task_id)) for reply in replies for task_id in reply}

    # the look first: a step that ran sent what follows it before its message went, so
    # what follows a step found nowhere is read after (then the look again, writing)
    found = look("0", set(why))
    lost = look("1", found - _ran(transport, keys, {i: traces[i] for i in found})) \
        if found else set()
    return {task_id: why[task_id] for task_id in lost}


__all__: List[Any] = ["lost_steps", "send_steps", "spawn_call", "step_traces", "traces_of"]
