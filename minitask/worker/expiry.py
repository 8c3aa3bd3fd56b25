"""Ending tasks whose ``expires`` passed before they started (flow control).

The fetch script finds them (``stores/lua/fetch.lua``) and leases them instead of
handing them out; here each ends ``cancelled`` with ``exc_type == "Expired"``, its
result readable like any other and kept for the task's own ``result_ttl`` (the
app's when the task is not registered here or its message does not decode). A
worker that dies first leaves them leased: the lease expires and the next fetch
reports them again, so none is lost.
"""
from __future__ import annotations

import logging
from typing import Dict, Sequence, Tuple

from ..errors import BrokerError, DecodeError, DurabilityError
from ..wire.message import Outcome, to_ms
from ..wire.serializer import decode_message
from .host import Host

logger = logging.getLogger(__name__)


def end_expired(host: Host, queue: str, expired: Sequence[Tuple[str, int]]) -> None:
    """Record the expired tasks of ``queue`` as cancelled, in one round trip."""
    if not expired:
        return
    results = host.broker.results
    outcome = Outcome("cancelled", host.clock.now_ms(), exc_type="Expired",
                      message="expired before it started (expires)", reason="expired")
    try:
        ttls = result_ttls(host, queue, [task_id for task_id, _ in expired])
        acks = [results.prepare_ack(queue, task_id, outcome, ttls[task_id][0],
                                    entry=results.entry(task_id, ttls[task_id][1],
                                                        "cancelled", outcome.finished_at_ms,
                                                        0, error="Expired: expired before "
                                                        "it started"))
                for task_id, _ in expired]
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
        logger.info("task %s of queue %r expired before it started; cancelled", task_id, queue)


def result_ttls(host: Host, queue: str, ids: Sequence[str]) -> Dict[str, Tuple[int, str]]:
    """Each expired task's own ``result_ttl`` in ms, and its name ("?" unknown), from
    its message (one HMGET)."""
    default = to_ms(host.result_ttl)
    broker = host.broker
    with broker.transport.errors(f"read the expired tasks of queue {queue!r}"):
        bodies = broker.transport.client.hmget(broker.queues.keys(queue).messages, list(ids))
    ttls: Dict[str, Tuple[int, str]] = {}
    for task_id, body in zip(ids, bodies):
        ttls[task_id] = (default, "?")
        if not isinstance(body, bytes):
            continue
        try:
            name = decode_message(body).task
        except DecodeError:
            continue  # a foreign message: the app's ttl, like an unknown task's
        task = host.tasks.get(name)
        ttls[task_id] = (default if task is None else to_ms(task.options.result_ttl), name)
    return ttls
