"""Task ids a new workflow may not give its steps, and their reservation.

A workflow step is sent only if its marker (``once:<id>``, see ``stores.workflows``)
holds no state yet, so that a step run twice never sends what follows it twice. The
marker outlives the step's run, as long as its workflow's longest result. An
explicit ``task_id`` that a task still in Redis holds, that a step of an earlier
workflow took while its marker lives, or that a workflow sent before and still
pending gives to a step it has not sent yet, would never be sent in a new one: its
group would never fill, and the chord body (or the group's next step) waiting for it
would stay pending for ever.

So a workflow reserves its explicit ids as it is sent (``step_ids.lua``, one call per
queue, in one round trip where the connection allows): each free id's marker gets the
workflow's id (field ``w``, no state), for the workflow's longest result ttl; spawn.lua
later sends the step over it. A taken id refuses the workflow at ``delay()``, naming
it and why, with nothing written; the reservations made in other queues meanwhile,
and all of them when sending fails, are released.
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Sequence, Tuple

from ..broker.packing import ScriptCall
from ..broker.transport import text
from ..errors import BrokerError, ConfigurationError, DurabilityError
from ..printable import own_logger, printable, shown_name
from ..wire.message import MAX_ID_BYTES
from .store import Store

logger = own_logger(__name__)

#: A task state that holds an id, as the refusal says it.
_STATES = {"queued": "queued", "scheduled": "scheduled", "running": "running",
           "retrying": "retrying", "dead": "a dead letter"}


class StepIdStore(Store):
    """Reserving the explicit task ids of a workflow's steps as it is sent."""

    scripts = ("step_ids",)

    def _calls(self, mode: str, tasks: Sequence[Tuple[str, str]], wid: str,
               ttl_ms: int) -> List[ScriptCall]:
        by_queue: Dict[str, List[str]] = {}
        for queue, task_id in tasks:
            by_queue.setdefault(queue, []).append(task_id)
        calls: List[ScriptCall] = []
        for queue, ids in by_queue.items():
            k = self.keys(queue)
            calls.append(("step_ids", queue,
                          (k.leases, k.delayed, k.retrying, k.dead, k.messages),
                          [*(k.once(task_id) for task_id in ids), mode, wid, ttl_ms,
                           MAX_ID_BYTES, *ids], len(ids)))
        return calls

    def reserve(self, tasks: Sequence[Tuple[str, str]], wid: str,
                ttl_ms: int) -> List[Tuple[str, str, str]]:
        """Reserve the ids of ``tasks`` (queue, id) for workflow ``wid``; the (id, why,
        other workflow or '') of those taken, none reserved then (those reserved in
        other queues meanwhile are released)."""
        calls = self._calls("reserve", tasks, wid, ttl_ms)
        try:
            replies = self.transport.run_calls(calls, f"reserve the task ids of {len(tasks)} "
                                                      f"workflow step(s)")
        except BrokerError as exc:  # refused (a marker of another type) or failed: none
            # is kept; a lost reply may have reserved them all: a workflow sent again
            # (another id) would find them taken
            if (len(calls) > 1 or exc.sent) and wid:
                self.release(tasks, wid)
            with nothing_sent():
                raise
        taken = [(text(reply[i]), text(reply[i + 1]), text(reply[i + 2]))
                 for reply in replies for i in range(0, len(reply), 3)]
        if taken and len(calls) > 1:
            self.release(tasks, wid)
        return taken

    def release(self, tasks: Sequence[Tuple[str, str]], wid: str) -> None:
        """Drop what ``reserve`` left of workflow ``wid``'s reservations (steps not sent:
        a sent or cancelled step's marker stays). A failure is logged, not raised: the
        reservations then expire with the workflow's results."""
        try:
            self.transport.run_calls(self._calls("release", tasks, wid, 0),
                                     f"release the task ids of {len(tasks)} workflow "
                                     f"step(s)")
        except BrokerError as exc:
            logger.warning("could not release the task ids reserved by workflow %s (%s); "
                           "they stay reserved until its results would expire", wid, exc)


@contextlib.contextmanager
def nothing_sent() -> Iterator[None]:
    """Within: calls that write nothing (a workflow's checks, its step-id reservations):
    the lost reply of one is told ``sent`` False, nothing of the workflow written."""
    try:
        yield
    except BrokerError as exc:
        if not exc.sent or isinstance(exc, DurabilityError):
            raise
        raise BrokerError(f"{exc}; nothing of the workflow was written (its steps were not "
                          f"sent): sending it again is safe", reason=exc.reason) from exc


def _refusal(workflow: object, taken: Sequence[Tuple[str, str, str]]) -> str:
    """The error naming each taken id, by what holds it."""
    held = [f"{task_id!r} ({_STATES[why]})" for task_id, why, _ in taken if why in _STATES]
    stepped = [repr(task_id) for task_id, why, _ in taken if why == "step"]
    reserved = [f"{task_id!r} (workflow {printable(shown_name(other)) or '?'})"
                for task_id, why, other in taken if why == "reserved"]
    said = ([f"{', '.join(held)} belong to tasks still in Redis"] if held else []) + \
        ([f"{', '.join(stepped)} were taken by a step of an earlier workflow (its marker "
          f"lives as long as its workflow's results)"] if stepped else []) + \
        ([f"{', '.join(reserved)} are reserved by a workflow for a step it has not sent "
          f"yet (or never will, if its producer stopped: the reservation ends with its "
          f"result ttl)"] if reserved else [])
    return (f"workflow {workflow!r}: the task id(s) {'; '.join(said)}: such a step would "
            f"never be sent, and what waits for it would stay pending for ever: choose "
            f"other ids")


@contextlib.contextmanager
def ids_reserved(store: StepIdStore, tasks: Sequence[Tuple[str, str]], workflow: object,
                 wid: str, ttl_ms: int) -> Iterator[None]:
    """Within: the explicit ids ``tasks`` (queue, id) of ``workflow`` (its repr names it
    in the error, made only then: a deep one's is costly) are reserved for ``wid``;
    released if the block raises (sending failed: its steps may be sent again), but for
    a BrokerError ``sent`` (a DurabilityError, a lost reply, a registry refused after
    the write: its steps are, or may be, in Redis: sent again, they would run twice).

    Raises:
        ConfigurationError: naming the ids taken, and why; nothing was written.
        BrokerError: Redis could not be reached, or a marker holds another type (named);
            nothing of the workflow was written (``sent`` False, its reply lost too).
    """
    unique = sorted(set(tasks))
    if not unique:  # ('' for ``wid``: a lone task, whose ids are checked, not reserved)
        yield
        return
    taken = store.reserve(unique, wid, ttl_ms)
    if taken:
        raise ConfigurationError(_refusal(workflow, taken))
    try:
        yield
    except BrokerError as exc:
        if exc.sent:  # written, or perhaps (a lost reply), or only not confirmed
            raise  # (DurabilityError): the steps may be in Redis, their ids stay theirs
        if wid:
            store.release(unique, wid)
        raise
    except BaseException:
        if wid:
            store.release(unique, wid)
        raise


__all__: List[Any] = ["StepIdStore", "ids_reserved"]
