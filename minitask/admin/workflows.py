"""A workflow as a whole: its plan record and the state of each of its steps.

``minitask inspect workflow ID`` and the dashboard's ``/workflow/ID`` read it here.
The reads are bounded by the plan, which keeps at most ``TASKS_SHOWN`` tasks: one
round trip for the record (a bounded GETRANGE per queue) and one for the steps' states.
"""
from __future__ import annotations

import datetime as _dt
from collections import Counter
from typing import Any, Dict, Optional, Sequence

from ..errors import DecodeError
from ..handle import status_of
from ..printable import printable
from ..stores.foreign import ignored, time_in, whole
from ..stores.plans import MORE_MOST, errbacks_of, parts_of, tasks_of, tree
from ..wire.message import to_seconds
from .operated import Operated, lookup_queues

#: The states a step is drawn in, as they read: not sent yet, waiting in its queue (or
#: for its eta), running, waiting to retry, ended; ``dead`` is a dead letter still in
#: its queue's dead letters (``failed`` once purged). A step Redis knows nothing of
#: reads ``expired`` when a later step was sent (so it ran, and its result expired or
#: was removed), ``unknown`` when the plan is older than the step's result ttl (not
#: sent yet, or ran and expired: Redis cannot tell), ``gone`` when no step of the
#: workflow is under way any more (a step purged before it ran, and those only it could
#: send: nothing will ever send them), else ``pending``. A step whose
#: kept result, or a key its state is read from, holds what no minitask wrote reads
#: ``unreadable`` (``minitask inspect ID`` of the step names the key).
STATES = ("pending", "queued", "scheduled", "running", "retrying", "succeeded", "failed",
          "dead", "cancelled", "expired", "unknown", "gone", "unreadable")
#: The state script's replies a step reads otherwise than its handle's status.
_NOT_A_STATUS = {"unknown": "pending", "dead": "dead"}


def workflow(app: Operated, workflow_id: str, queues: Optional[Sequence[str]] = None,
             say: bool = True) -> Optional[Dict[str, Any]]:
    """The workflow ``workflow_id`` (its handle's id, as each step's marker names it),
    JSON-ready: ``{"id", "kind", "started_at", "root", "counts", "tasks", "left_out",
    "steps", "errbacks"}``, ``root`` its tree (stores/plans.py) with a ``state`` on
    each task and on each error callback (``on_error``; ``counts`` and ``tasks`` are
    of the steps the plan kept, ``left_out`` the items it left out, ``steps`` the
    workflow's true number of steps, kept or not (None when the record does not say:
    an older minitask wrote it), ``errbacks`` how many error callbacks are kept); or
    None when no queue of the app holds its plan (never sent, sent by an older
    minitask, or expired with its results). ``summary`` says its size in words.
    ``queues``: those to look in, when the caller has read them (``lookup_queues``);
    ``say`` False: a plan record that cannot be read is not said in the log too (the
    caller prints the error).

    Raises:
        DecodeError: the plan record is not one this minitask wrote (naming its key).
        BrokerError: Redis could not be reached.
    """
    broker = app.broker
    if queues is None:
        queues, _ = lookup_queues(app)
    found = broker.workflows.plan(workflow_id, queues, say)
    if found is None:
        return None
    record = found[1]
    root = _tree_of(*found)
    tasks, errbacks = tasks_of(root), errbacks_of(root)
    states = broker.results.states([(task["queue"], task["id"])
                                    for task in tasks + errbacks])
    for task, (state, outcome) in zip(tasks + errbacks, states):
        task["state"] = _state(state, outcome)
    at, _ = time_in(found[0], record.get("at"), "start time")
    age_ms = None if at is None else app.clock.now_ms() - at
    _unsent(root, False, age_ms)
    for errback in errbacks:
        _unsent(errback, False, age_ms)
    left_out = _left_out(root)
    if not left_out and not any(task["state"] in _UNDER_WAY for task in tasks):
        for task in tasks:  # nothing under way can send them (ranout.stranded)
            if task["state"] == "pending":
                task["state"] = "gone"
    started = (None if at is None else
               _dt.datetime.fromtimestamp(to_seconds(at), tz=_dt.timezone.utc).isoformat())
    steps = len(tasks) if not left_out else whole(record.get("s"), len(tasks) + 1, MORE_MOST)
    return {"id": workflow_id, "kind": root["kind"], "started_at": started, "root": root,
            "counts": dict(Counter(task["state"] for task in tasks)), "tasks": len(tasks),
            "left_out": left_out, "steps": steps, "errbacks": len(errbacks)}


#: The states of a step still to end, which a step waiting for it may follow.
_UNDER_WAY = frozenset({"queued", "scheduled", "running", "retrying"})


def waiting_step(found: Dict[str, Any], task_id: str) -> bool:
    """Whether ``task_id`` is a step of the workflow ``found`` (as ``workflow`` reads
    it) not sent yet that waits for others: ``pending``, while another step is still
    under way (or left out of the plan), as a chord's body while its members run. A
    pending step that nothing under way can send (its workflow broke) waits for none."""
    tasks = tasks_of(found["root"])
    return any(task["id"] == task_id and task["state"] == "pending" for task in tasks) and (
        bool(found["left_out"]) or any(task["state"] in _UNDER_WAY for task in tasks))


def summary(found: Dict[str, Any]) -> str:
    """A workflow's size in words, as ``workflow`` reads it: "a chord of 3,001 task(s),
    51 kept in its plan, 2,950 left out" (what the dashboard and ``minitask inspect
    workflow`` both say); the counts of states are of the tasks kept."""
    kind, kept, left_out, steps = (found["kind"], found["tasks"], found["left_out"],
                                   found.get("steps"))
    if not left_out:
        return f"a {kind} of {kept:,} task(s)"
    if steps is not None:
        return (f"a {kind} of {steps:,} task(s), {kept:,} kept in its plan, "
                f"{steps - kept:,} left out")
    return (f"a {kind}: {kept:,} task(s) kept in its plan, {left_out:,} more step(s) "
            f"left out (how many tasks they hold, its plan does not say)")


def _tree_of(key: str, record: Any) -> Dict[str, Any]:
    """``tree(record)``, its refusal naming ``key`` (said once in the log too)."""
    try:
        return tree(record)
    except DecodeError as exc:
        ignored(key, str(exc))
        raise DecodeError(f"{printable(key)}: {exc}") from None


def workflow_of(app: Operated, queue: str, task_id: str) -> str:
    """The id of the workflow whose step ``task_id`` is ('' for a plain task)."""
    return app.broker.workflows.workflow_of(queue, task_id)


def _state(state: str, outcome: Optional[bytes]) -> str:
    """A step's state (``STATES``): its handle's status (``status_of``), but a dead
    letter reads ``dead``, a step Redis does not know ``pending`` (``_unsent`` tells
    expired and unknown ones apart), one whose outcome or keys cannot be read
    ``unreadable``."""
    if state in _NOT_A_STATUS:
        return _NOT_A_STATUS[state]
    return status_of(state, outcome, unreadable="unreadable")


def _unsent(node: Dict[str, Any], later_sent: bool, age_ms: Optional[float]) -> bool:
    """Tell ``expired`` and ``unknown`` from ``pending`` (see ``STATES``) under ``node``,
    ``later_sent`` whether a step after it was sent; whether a step of it was sent."""
    kind = node["kind"]
    if kind == "task":
        sent = bool(node["state"] != "pending")
        if not sent and later_sent:
            node["state"] = "expired"
        elif not sent and age_ms is not None and node["ttl"] and age_ms > node["ttl"]:
            node["state"] = "unknown"
        return sent
    if kind == "group":
        return any([_unsent(member, later_sent, age_ms) for member in node["members"]])
    if kind == "chord":
        body = _unsent(node["body"], later_sent, age_ms)
        return any([_unsent(member, later_sent or body, age_ms)
                    for member in node["header"]]) or body
    sent = False
    for step in reversed(node["steps"]):
        sent = _unsent(step, later_sent or sent, age_ms) or sent
    return sent


def _left_out(node: Dict[str, Any]) -> int:
    """Items (steps, members) the plan left out, over the whole tree."""
    if node["kind"] == "task":
        return 0
    return int(node["more"]) + sum(_left_out(part) for part in parts_of(node))
