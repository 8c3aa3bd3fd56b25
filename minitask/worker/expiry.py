"""Ending tasks whose ``expires`` passed before they started (flow control).

The fetch script finds them (``stores/lua/fetch.lua``) and leases them instead of
handing them out; here each ends ``cancelled`` with ``exc_type == "Expired"``, its
result readable like any other and kept for the task's own ``result_ttl`` (the
app's when the task is not registered here or its message does not decode). A
worker that dies first leaves them leased: the lease expires and the next fetch
reports them again, so none is lost.

A retry that expires before it starts says what ran before it: its outcome's
``attempt`` is how many attempts ran, and its message and traceback keep the last
one's error (the retry's note, bounded like every error text the worker keeps).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from ..errors import BrokerError, DecodeError, DurabilityError, error_said
from ..printable import cut_text, ERROR_TEXT_MOST, ERROR_TRACE_MOST, own_logger
from ..wire.message import Outcome, to_ms
from ..wire.serializer import decode_message, decode_outcome
from .host import Host

logger = own_logger(__name__)


@dataclass(frozen=True)
class ExpiredTask:
    """What an expired task's record is made of: its ``result_ttl`` (ms), its name ("?"
    unknown), and the note of its last failed attempt, if one ran (a retry expired)."""

    ttl_ms: int
    name: str
    last: Optional[Outcome] = None


def end_expired(host: Host, queue: str, expired: Sequence[Tuple[str, int]]) -> None:
    """Record the expired tasks of ``queue`` as cancelled, in one round trip."""
    if not expired:
        return
    results = host.broker.results
    now_ms = host.clock.now_ms()
    try:
        found = expired_tasks(host, queue, [task_id for task_id, _ in expired])
        acks = []
        for task_id, _ in expired:
            task = found[task_id]
            outcome = expired_outcome(now_ms, task.last)
            acks.append(results.prepare_ack(
                queue, task_id, outcome, task.ttl_ms,
                entry=results.entry(task_id, task.name, "cancelled", now_ms, outcome.attempt,
                                    error=f"Expired: {outcome.message}")))
        results.ack_many(acks)
    except DurabilityError as exc:
        # written, not confirmed: a failover may lose it, and the task then expires again
        logger.error("replicas did not confirm the expiry of tasks of queue %r (%s); a "
                     "failover may bring them back, to expire again", queue, exc)
        return
    except BrokerError as exc:
        # they stay leased: once the lease expires, a fetch reports them again
        logger.error("could not record expired tasks of queue %r (%s)", queue, exc)
        return
    for task_id, _ in expired:
        ran = found[task_id].last
        logger.info("task %s of queue %r expired before it started%s; cancelled", task_id,
                    queue, "" if ran is None else
                    f" (a retry: {ran.attempt} attempt(s) ran, the last failed with "
                    f"{ran.exc_type or 'an error'})")


def expired_outcome(now_ms: int, last: Optional[Outcome]) -> Outcome:
    """The outcome of a task that expired before it started; of a retry (``last`` the
    note of the attempt before it), how many attempts ran and the last one's error."""
    if last is None:
        return Outcome("cancelled", now_ms, exc_type="Expired",
                       message="expired before it started (expires)", reason="expired")
    error = error_said(last.exc_type, last.message) if last.exc_type else last.message
    return Outcome("cancelled", now_ms, exc_type="Expired",
                   message=cut_text(f"expired before attempt {last.attempt + 1} started "
                                    f"(expires); {last.attempt} attempt(s) ran, the last "
                                    f"failed with {error}", ERROR_TEXT_MOST),
                   traceback=cut_text(last.traceback, ERROR_TRACE_MOST), reason="expired",
                   attempt=last.attempt)


def expired_tasks(host: Host, queue: str, ids: Sequence[str]) -> Dict[str, ExpiredTask]:
    """Each expired task's ``ExpiredTask``, from its message and its retry note (one
    round trip: an HMGET of each). A message or note minitask did not write counts
    as none (the app's ttl; no attempt known to have run)."""
    default = to_ms(host.result_ttl)
    broker = host.broker
    keys = broker.queues.keys(queue)
    with broker.transport.errors(f"read the expired tasks of queue {queue!r}"):
        pipe = broker.transport.client.pipeline(transaction=False)
        pipe.hmget(keys.messages, list(ids))
        pipe.hmget(keys.retrying, list(ids))
        bodies, notes = pipe.execute(raise_on_error=False)
        if isinstance(bodies, Exception):
            raise bodies  # the messages' refusal: the transport's errors() names it
    if isinstance(notes, Exception):  # retrying of another type: no note kept there
        notes = [None] * len(ids)
    found: Dict[str, ExpiredTask] = {}
    for task_id, body, note in zip(ids, bodies, notes):
        ttl_ms, name = default, "?"
        if isinstance(body, bytes):
            try:
                name = decode_message(body).task
            except DecodeError:
                pass  # a foreign message: the app's ttl, like an unknown task's
            else:
                task = host.tasks.get(name)
                ttl_ms = default if task is None else to_ms(task.options.result_ttl)
        found[task_id] = ExpiredTask(ttl_ms, name, _note(note))
    return found


def _note(data: Any) -> Optional[Outcome]:
    """A retry's note as the worker wrote it (its last failed attempt), or None."""
    if not isinstance(data, bytes):
        return None
    try:
        note = decode_outcome(data)
    except DecodeError:
        return None
    return note if note.status == "retrying" and note.attempt > 0 else None
