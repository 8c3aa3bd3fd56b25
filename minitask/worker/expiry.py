"""Ending tasks whose ``expires`` passed before they started (SPEC 11).

The fetch script finds them (``stores/lua/fetch.lua``) and leases them instead of
handing them out; here each ends ``cancelled`` with ``exc_type == "Expired"``, its
result readable like any other. A worker that dies first leaves them leased: the
lease expires and the next fetch reports them again, so none is lost.
"""
from __future__ import annotations

import logging
from typing import Sequence, Tuple

from ..errors import BrokerError, DurabilityError
from ..message import Outcome, to_ms
from .host import Host

logger = logging.getLogger(__name__)


def end_expired(host: Host, queue: str, expired: Sequence[Tuple[str, int]]) -> None:
    """Record the expired tasks of ``queue`` as cancelled, in one round trip."""
    if not expired:
        return
    results = host.broker.results
    outcome = Outcome("cancelled", host.clock.now_ms(), exc_type="Expired",
                      message="expired before it started (expires)", reason="expired")
    ttl_ms = to_ms(host.result_ttl)
    acks = [results.prepare_ack(queue, task_id, outcome, ttl_ms) for task_id, _ in expired]
    try:
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
