"""Why a wait for a result ran out, told the same by ``get()`` and ``aget()``.

The message is made from a reading of where the task is (its status, the live
workers of its queue, when a scheduled run is due); each twin makes that reading
its own way (``aget()`` awaits the status and holds no loop for the rest) and
hands it to the one function that words it.
"""
from __future__ import annotations

import asyncio
import datetime as _dt
import math
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

from .broker.health import on_redis_time
from .broker.pools import PoolExhausted, pool_waits_cut_at
from .errors import BrokerError, ConfigurationError, DecodeError, ResultTimeout
from .printable import printable, short_repr, shown_name
from .stores.broker import Broker
from .stores.plans import parts_of, tasks_of, tree
from .stores.results import readable_state, status_of
from .wire.message import SystemClock

#: The clock a timeout's message judges heartbeats by: Redis's, as workers write them.
_READER_CLOCK = SystemClock()


def check_timeout(timeout: Any, where: str) -> None:
    """Refuse a wait's ``timeout`` that is not None or a number of seconds, 0 or more,
    that a float can hold: NaN would wait forever (no time is ever past it), a str or
    an int past a float's range would fail deep in the wait (the deadline is a float),
    and a negative one looked once and said the task "did not finish within -1 s" (0
    looks once: what a negative one can only have meant). The one check of every wait
    (``get``, ``aget``, a group's, a broadcast's ``join``)."""
    if timeout is not None and (not isinstance(timeout, (int, float))
                                or isinstance(timeout, bool) or not timeout >= 0
                                or isinstance(timeout, int) and timeout > _FLOAT_MOST):
        raise ConfigurationError(f"{where}: timeout must be a number of seconds, 0 or more, "
                                 f"or None (no end), got {short_repr(timeout)}")


#: The largest float: a bigger int cannot be a deadline.
_FLOAT_MOST = sys.float_info.max

#: A worker whose last heartbeat is older than this is not counted as live.
LIVE_MS = 60_000

#: Statuses whose message names when the task is due (a scheduled or retrying run).
_DUE_SAID = frozenset({"unknown", "succeeded", "failed", "cancelled", "running", "queued"})


@dataclass(frozen=True)
class Place:
    """Where a task is when its wait runs out: its ``status``, the live workers that
    serve its queue (``serving``), and when its next run is due (``due``, or "")."""

    status: str
    serving: List[str]
    due: str = ""


def unknown_message(task_id: str, queue: Optional[str], where: str) -> str:
    place = f"in queue {queue!r}" if queue else "in any queue of the app"
    return (f"task {task_id} is unknown {place} on {where}: it was never enqueued on this "
            f"broker (do producer and worker use the same MINITASK_BROKER_URL and app "
            f"name?), its result expired (result_ttl), or it was an ignore_result task; "
            f"there is nothing to wait for")


def gone_message(task_id: str, name: Optional[str], queue: str, where: str) -> str:
    """Why a wait for a workflow step known to have been sent ends at once: it is gone."""
    sent = f"task {name!r} was sent" if name else "it was sent (a workflow step)"
    return (f"task {task_id} is unknown in queue {queue!r} on {where}: {sent}, so its "
            f"result expired (result_ttl) or was forgotten (forget(), by any process), "
            f"it was purged from its queue, or it keeps none (ignore_result); there is "
            f"nothing to wait for")


def place_of(broker: Broker, queue: str, task_id: str, status: str) -> Place:
    """The rest of the reading once the status is known (blocking reads)."""
    due = "" if status in _DUE_SAID else _due_text(broker, queue, task_id)
    return Place(status, _live_workers(broker, queue), due)


#: How long ``aget()`` may read where the task is, for its message, once its wait is
#: seen to have run out.
LOOK_GRACE = 0.25


def unlooked_message(task_id: str, timeout: Optional[float], grace: float) -> str:
    return (f"{_head(task_id, timeout)}; its status was not read: the {grace} s given to "
            f"read it ran out (as when many waits end together); call status() to see "
            f"where it is")


def timeout_message_now(handle: Any, queue: str, timeout: Optional[float]) -> str:
    """Why ``get()``'s wait ran out, its reads queued for a connection of a full pool
    ``LOOK_GRACE`` s at most, as ``aget()``'s are: hundreds of threads' waits running
    out together would otherwise queue for seconds behind each other's reads."""
    try:
        with pool_waits_cut_at(time.monotonic() + LOOK_GRACE):
            place = place_of(handle._broker, queue, handle.id, handle.status())
    except BrokerError as exc:
        if _cut_short(exc):
            return unlooked_message(handle.id, timeout, LOOK_GRACE)  # less, rather than late
        return unread_message(handle.id, timeout, exc)
    return timeout_message(handle.id, timeout, queue, handle._broker.description,
                           handle._sent_later, place)


def gone(handle: Any, queue: str, deadline: Optional[float]) -> bool:
    """Whether the task a wait is for is unknown now (an ``ignore_result`` task ended,
    purged or forgotten while waited for): nothing is left to wait for. Its state is
    read waiting for a connection of a full pool until the wait's deadline at most:
    a state not read by then is no sign it is gone."""
    try:
        with pool_waits_cut_at(math.inf if deadline is None else deadline):
            state = handle._results.state(queue, handle.id)
    except BrokerError as exc:
        if _cut_short(exc):
            return False
        raise
    return readable_state(state, handle.id) == "unknown"


#: The statuses of a task that may still end, and send the steps that follow it.
_PENDING = frozenset({"scheduled", "queued", "running", "retrying"})

#: At most this many of the tasks that send a step are read (one round trip) to tell a
#: step that ran from one whose marker minitask did not write (``step_gone``).
BEFORE_READ = 100


def step_gone(handle: Any, queue: str, deadline: Optional[float]) -> bool:
    """Whether the workflow step a wait is for (a step sent later: ``StepHandle``) ran
    and is gone: its marker says it was sent (read first: a step sent after its state
    was read would read unknown), its state reads unknown (``gone``), and none of the
    tasks that send it (``_before``) is still pending (one that is: a marker minitask
    did not write, and the step ends cancelled naming it once that ends; its state is
    read again after them). A step whose marker says nothing may not be sent yet: it is
    waited for, unless it never will be (``stranded``: ResultTimeout raised, naming
    why). Read as ``gone`` reads, within the wait's deadline."""
    if not _within(lambda: handle._broker.unsent.marked(queue, handle.id), deadline,
                   False):
        why = _within(lambda: stranded(handle, queue), deadline, "")
        if why:
            raise ResultTimeout(why)
        return False
    if not gone(handle, queue, deadline):
        return False
    if not getattr(handle, "_before", ()):
        return True
    if _within(lambda: _pending(handle), deadline, True):
        return False
    return gone(handle, queue, deadline)


def stranded(handle: Any, queue: str) -> str:
    """Why the workflow step of ``handle``, not sent (its marker says so), never will
    be, or "" (it may be: waited for). It will not when none of the tasks that send
    it (``_before``) is pending, and no step of its workflow is under way (as its
    plan lists them; one that leaves steps out tells nothing): those before it ended
    or are gone without sending it (purged from their queue before they ran: purge
    removes a message and leaves no outcome, so nothing ever sends what follows).
    Read after them, its marker still says not sent and its state unknown: a step
    sent meanwhile is not stranded. Blocking reads (``aget()`` runs it on a thread).
    """
    broker = handle._broker
    if not getattr(handle, "_before", ()) or _pending(handle):
        return ""
    # a step not sent has no marker naming its workflow yet: the last step's handle
    # (a chain's, a chord's body) is its workflow's, by id
    workflow_id = (broker.workflows.workflow_of(queue, handle.id)
                   or getattr(handle, "workflow_id", None) or handle.id)
    try:
        found = broker.workflows.plan(workflow_id, handle._queues.lookup_names()[0], False)
        root = None if found is None else tree(found[1])
    except DecodeError:
        return ""
    tasks = [] if root is None or _leaves_out(root) else tasks_of(root)
    if not any(task["id"] == handle.id for task in tasks):
        return ""  # no plan of its workflow (or one that leaves steps out): nothing told
    states = broker.results.states([(task["queue"], task["id"]) for task in tasks])
    if any(status_of(*state) in _PENDING for state in states):
        return ""
    if broker.unsent.marked(queue, handle.id) or not gone(handle, queue, None):
        return ""
    lost = [task["id"] for task, state in zip(tasks, states)
            if status_of(*state) == "unknown" and task["id"] != handle.id][:3]
    named = f" ({', '.join(lost)}{', ...' if len(lost) == 3 else ''} read unknown)" \
        if lost else ""
    return (f"task {handle.id} is a step of workflow {workflow_id} that will never be "
            f"sent: an earlier step was purged from its queue (minitask purge) or is gone "
            f"without sending it{named}, and no step of the workflow is under way; there "
            f"is nothing to wait for (minitask inspect workflow {workflow_id} shows its "
            f"steps)")


def _leaves_out(node: Any) -> bool:
    """Whether a plan's ``tree`` left steps out (their states cannot be read)."""
    return bool(node.get("more")) or any(_leaves_out(part) for part in parts_of(node))


def _within(read: Callable[[], Any], deadline: Optional[float], cut: Any) -> Any:
    """``read()``, waiting for a connection of a full pool until ``deadline`` at most:
    ``cut`` when it had to wait longer."""
    try:
        with pool_waits_cut_at(math.inf if deadline is None else deadline):
            return read()
    except BrokerError as exc:
        if _cut_short(exc):
            return cut
        raise


def _pending(handle: Any) -> bool:
    """Whether a task that sends the step of ``handle`` may still end (blocking reads)."""
    before = getattr(handle, "_before", ())[:BEFORE_READ]
    return bool(before) and any(status_of(*state) in _PENDING
                                for state in handle._results.states(before))


async def agone(handle: Any, broker: Any, queue: str, deadline: Optional[float]) -> bool:
    """``gone`` (``step_gone`` for a step sent later), awaited: read before the deadline;
    a state not read by then is not "unknown": the wait runs out at once and its message
    reads where the task is if there is time. The tasks that send a step are read on a
    thread, only once its marker says it was sent and it is unknown."""
    from .stores.aio import step_marked  # (loaded already: an aget() runs)
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        return False
    bound = asyncio.timeout(left)
    try:
        async with bound:
            if handle._sent_later and not await step_marked(broker, queue, handle.id):
                why = await asyncio.get_running_loop().run_in_executor(
                    None, stranded, handle, queue)
                if why:
                    raise ResultTimeout(why)
                return False  # maybe not sent yet: waited for
            if readable_state(await broker.state(queue, handle.id), handle.id) != "unknown":
                return False
            if not handle._sent_later or not getattr(handle, "_before", ()):
                return True
            if await asyncio.get_running_loop().run_in_executor(None, _pending, handle):
                return False
            # read again: a step cancelled as its sender ended has its outcome now
            return readable_state(await broker.state(queue, handle.id),
                                  handle.id) == "unknown"
    except TimeoutError:
        if not bound.expired():
            raise
        return False


def _cut_short(exc: BaseException) -> bool:
    seen: Optional[BaseException] = exc
    while seen is not None and not isinstance(seen, PoolExhausted):
        seen = seen.__cause__ or seen.__context__
    return seen is not None


async def atimeout_message(handle: Any, queue: str, timeout: Optional[float]) -> str:
    """Why ``aget()``'s wait ran out, worded as ``get()``'s, read within ``LOOK_GRACE``
    s (a thousand waits running out together would otherwise queue their reads for
    seconds): the status awaited, the workers and due time read on a thread (they
    have no async twin), not on the loop. The grace counts from now, as the wait is
    seen to have run out, not from the deadline: a wait's one look at the result takes
    up to 0.1 s (the waits' glance), so ``aget(timeout=0)`` had no time left, and said
    less than ``get(timeout=0)`` on the same handle."""
    left = LOOK_GRACE
    bound = asyncio.timeout(left)
    try:
        async with bound:
            place = await _alook(handle, queue)
    except TimeoutError:
        if not bound.expired():
            raise
        return unlooked_message(handle.id, timeout, LOOK_GRACE)  # less, rather than late
    except BrokerError as exc:
        return unread_message(handle.id, timeout, exc)
    return timeout_message(handle.id, timeout, queue, handle._broker.description,
                           handle._sent_later, place)


async def _alook(handle: Any, queue: str) -> Place:
    status = await handle.astatus()
    return await asyncio.get_running_loop().run_in_executor(
        None, place_of, handle._broker, queue, handle.id, status)


def unread_message(task_id: str, timeout: Optional[float], exc: Exception) -> str:
    return f"{_head(task_id, timeout)} (and its status could not be read: {exc})"


def timeout_message(task_id: str, timeout: Optional[float], queue: str, where: str,
                    sent_later: bool, place: Place) -> str:
    """Why the wait ran out, from where the task is now and who serves its queue."""
    head, status, serving = _head(task_id, timeout), place.status, place.serving
    if status == "unknown" and sent_later:  # as minitask inspect tells it
        return (f"{head}; it is not sent yet: a later step of a workflow, sent once the "
                f"steps before it end (minitask inspect workflow, given the id of the "
                f"workflow's handle, shows where they are), unless it was purged")
    if status == "unknown":
        return f"{head}; it is now unknown (cancelled and expired, or purged)"
    if status in ("succeeded", "failed", "cancelled"):
        return f"{head}; it has just finished ({status}): call get() again"
    if status == "running":
        return f"{head}; it is still running (a long task, or a worker that died with " \
               f"it: then it runs again once its lease expires)"
    workers = (f"{len(serving)} live worker(s) serve queue {queue!r} "
               f"({', '.join(serving[:3])}{', ...' if len(serving) > 3 else ''})"
               if serving else
               f"no live worker serves queue {queue!r} on {where}: start "
               f"one (minitask worker -A APP -Q {queue}), and check that producer and "
               f"worker use the same broker and app name")
    if status == "queued":
        return f"{head}; it is still queued: {workers}"
    return f"{head}; it is {status}{place.due}; {workers}"


def _head(task_id: str, timeout: Optional[float]) -> str:
    return f"task {task_id} did not finish within {timeout} s"


def _live_workers(broker: Broker, queue: str) -> List[str]:
    """The names of the live workers serving ``queue``, as a message shows them: escaped
    and cut (``shown_name``: a name planted in Redis may be megabytes)."""
    on_redis_time(_READER_CLOCK, broker.client)  # heartbeats are on Redis's clock
    now_ms = _READER_CLOCK.now_ms()
    names = []
    for info in broker.registry.live(now_ms, LIVE_MS):
        if queue in info.get("queues", "").split(","):
            names.append(printable(shown_name(info["name"])))
    return names


def _due_text(broker: Broker, queue: str, task_id: str) -> str:
    due_ms = broker.admin.record(queue, task_id).due_ms
    if due_ms is None:
        return ""
    due = _dt.datetime.fromtimestamp(due_ms / 1000.0, _dt.timezone.utc)
    return f" (next run due at {due.isoformat(timespec='milliseconds')})"
