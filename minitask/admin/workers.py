"""The app's live workers, and stopping them from afar."""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Optional, Sequence

from ..broker.health import on_redis_time
from ..errors import BrokerError, ConfigurationError
from ..printable import NAMES_SHOWN_MOST, printable, shown_name
from ..stores.registry import SHOWN_WORKERS, SHUTDOWN, TRUSTED_AHEAD_MS, WorkerListing
from .operated import Operated

__all__ = ["LIVE_MS", "NAMED_MOST", "SHOWN_WORKERS", "TRUSTED_AHEAD_MS", "WorkerListing",
           "live_workers", "named_workers", "shutdown", "stalled_queues", "stoppable_workers",
           "unknown_workers", "worker_listing"]

#: A worker whose last heartbeat is older than this is not live.
LIVE_MS = 60_000
#: Live workers a message naming them (no worker of that name) names at most.
NAMED_MOST = 20


def live_workers(app: Operated) -> List[Dict[str, str]]:
    """The app's workers whose heartbeat is recent, each a dict with its ``name``: at
    most ``LIVE_MS`` old, and at most ``TRUSTED_AHEAD_MS`` ahead of the app's clock."""
    return worker_listing(app).live


def worker_listing(app: Operated) -> WorkerListing:
    """The app's live workers (``live_workers``), how many more are not shown, and the
    records whose heartbeat lies further ahead of the app's clock than a live
    worker's can (a clock ahead, or a record no worker renews): listed apart, not live.

    Each record as the listings show it (``minitask status``, the dashboard, shutdown):
    every field of text cut as ``shown_name`` cuts a name (a worker's queues at
    ``NAMES_SHOWN_MOST``), its ``running_ids`` kept (JSON, bounded by the registry).
    """
    # on Redis's clock, as the workers write their heartbeats
    on_redis_time(app.clock, app.broker.client)
    listed = app.broker.registry.listing(app.clock.now_ms(), LIVE_MS, SHOWN_WORKERS)
    return dataclasses.replace(listed, live=[_shown(info) for info in listed.live],
                               ahead=[_shown(info) for info in listed.ahead])


def _shown(info: Dict[str, str]) -> Dict[str, str]:
    """A worker's record with each field of text (its name, host, pool: data anyone
    with Redis access may have planted, a 2 MB name made ``minitask status`` 2.8 MB)
    cut as ``shown_name`` cuts a name, its queues list at ``NAMES_SHOWN_MOST``. Its id
    (a member the registry checked: a name) and counts (checked whole numbers) are
    never cut; ``running_ids`` stays the JSON the pages read."""
    return {field: value if field in ("id", "running_ids", "stalled") else
            shown_name(value, NAMES_SHOWN_MOST) if field == "queues" else shown_name(value)
            for field, value in info.items()}


def stalled_queues(workers: Sequence[Dict[str, Any]]) -> Dict[str, str]:
    """The queues live workers say Redis refuses every fetch of (their records'
    ``stalled``: a key of the queue a fetch cannot recover from), each with why
    (naming the key) and which worker says so: what ``minitask status`` and the
    dashboard show beside the queue. A record's field that is no such JSON (planted)
    says none; every text is escaped and bounded."""
    found: Dict[str, str] = {}
    for info in workers:
        try:
            said = json.loads(info.get("stalled") or "{}")
        except ValueError:
            continue
        if not isinstance(said, dict):
            continue
        for queue, why in list(said.items())[:10]:
            if isinstance(queue, str) and isinstance(why, str):
                found.setdefault(shown_name(queue), f"{shown_name(why, 400)} (worker "
                                                    f"{shown_name(str(info.get('name')))})")
    return found


def shutdown(app: Operated, names: Sequence[str] = (), *, every: bool = False,
             refused: Optional[List[str]] = None) -> List[str]:
    """Ask live workers (and those listed "clock ahead") to stop as on SIGTERM: they
    stop fetching, give running tasks their grace and exit; each acts on it at once
    (it waits on Redis for orders).

    Args:
        names: the workers to stop, each by its name (``--name``: every worker of that
            name) or its id, as ``minitask status`` lists them.
        every: stop every live worker of the app instead.
        refused: where to add the error of each worker whose orders list holds
            another type (data minitask did not write, named), instead of raising.

    Returns:
        The ids of the workers asked. One whose orders list Redis refuses does not
        keep the others from being asked.

    Raises:
        ConfigurationError: no name and not ``every``, or a name that is no live worker
            (nothing is sent then).
        BrokerError: Redis could not be reached (saying which workers were asked
            before), or, without ``refused``, once every other worker is asked, the
            orders lists of another type (each named, and who was asked).
    """
    live = stoppable_workers(app)
    if not every and not names:
        raise ConfigurationError("name the workers to stop (see minitask status), or pass --all")
    unknown = unknown_workers(live, names)
    if unknown and not every:
        raise ConfigurationError(
            f"no live worker of app {app.name!r} is named {', '.join(map(repr, unknown))}; "
            f"live workers: {named_workers(live)}")
    asked: List[str] = []
    errors: List[str] = []
    for worker_id in [info["id"] for info in live
                      if every or info["name"] in names or info["id"] in names]:
        try:
            app.broker.registry.send_order(worker_id, SHUTDOWN)
        except BrokerError as exc:
            if exc.reason != "wrong type":
                raise BrokerError(f"{exc}{_asked_before(asked)}", reason=exc.reason) from exc
            errors.append(str(exc))
            continue
        asked.append(worker_id)
    if refused is not None:
        refused.extend(errors)
    elif errors:
        raise BrokerError("; ".join(errors) + _asked_before(asked), reason="wrong type")
    return asked


def _asked_before(asked: Sequence[str]) -> str:
    """What was done before an error: the workers asked to stop, if any."""
    if not asked:
        return ""
    return f" (asked to stop: {', '.join(printable(worker) for worker in asked)})"


def stoppable_workers(app: Operated) -> List[Dict[str, str]]:
    """The workers an order can reach: the live ones and those listed "clock ahead" (a
    real worker whose clock runs fast must still be stoppable; an order left for a
    record no worker renews expires unread)."""
    listed = worker_listing(app)
    return listed.live + listed.ahead


def named_workers(live: Sequence[Dict[str, str]]) -> str:
    """The names of the workers ``live`` (``worker_listing``'s), escaped, sorted, at
    most ``NAMED_MOST`` of them and how many more; "none" for none."""
    names = sorted({printable(info["name"]) for info in live})
    more = len(names) - NAMED_MOST
    return (", ".join(names[:NAMED_MOST]) or "none") + (
        f" and {more} more (minitask status lists them)" if more > 0 else "")


def unknown_workers(live: Sequence[Dict[str, str]], names: Sequence[str]) -> List[str]:
    """The names among ``names`` that are neither the name nor the id of a live worker."""
    known = {info["name"] for info in live} | {info["id"] for info in live}
    return [name for name in names if name not in known]
