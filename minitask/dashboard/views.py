"""What each dashboard page shows, as JSON-ready dicts; the pages and the JSON
endpoints read the same data.

Every read is bounded by how many queues, workers, schedules or dead letters
are shown, never by how many tasks are queued: counts come from LLEN and
ZCARD, throughput from a per-minute series the workers keep.
"""
from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Dict, List, Optional

from ..admin import (PAGE_SIZE, TRUSTED_AHEAD_MS, all_queue_counts, dead_rows, inspect,
                     live_workers, schedule_counts, schedule_page, shown_queues,
                     stalled_queues, worker_listing)
from ..admin.activity import (MAX_LENGTH, PEEK_MOST, progress_of, recent, running,
                              scheduled)
from ..admin.workflows import workflow_of
from ..app import Minitask
from ..printable import shown_id
from ..stores.foreign import whole

#: Schedules a page shows unless told (``?limit=``).
SCHEDULES_PAGE = PAGE_SIZE
#: Dead letters a page shows (oldest first, queue by queue).
DEAD_LIMIT = 100
#: Tasks a running, scheduled or recent listing returns at most (``limit``).
LIST_LIMIT = 500
#: Outcomes a worker's page lists (its newest).
WORKER_RECENT = 20
#: Queues the throughput chart draws a line for (the busiest); the table lists all.
CHART_LINES = 8
CHART_WIDTH = 600
CHART_HEIGHT = 160
#: Running task ids a worker's page shows at most (a worker lists at most its
#: concurrency).
SHOWN_RUNNING = 1000
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f")


def queues(app: Minitask) -> Dict[str, Any]:
    # the queues the app declares and at most SHOWN_OTHERS more from its registry
    # (20,000 planted names took 11 s)
    shown, left_out = shown_queues(app)
    counts = all_queue_counts(app, shown)  # parked tasks counted as ready
    live = live_workers(app)
    # a queue whose every fetch Redis refuses (a key a worker cannot recover from), as
    # the live workers say: shown beside it, with why
    stalled = stalled_queues(live)
    found = [{"queue": name, **counted, "stalled": stalled.get(name, "")}
             for name, counted in counts.items()]
    return {"app": app.name, "queues": found, "queues_left_out": left_out,
            "workers": len(live)}


def workers(app: Minitask) -> Dict[str, Any]:
    now = app.clock.now_ms()
    found = []
    listed = worker_listing(app)
    for info in listed.live:
        beat = _int(info.get("beat_ms"))
        found.append({
            "name": info["name"], "id": info.get("id", info["name"]),
            "host": info.get("host", ""), "pid": _int(info.get("pid")),
            "queues": info.get("queues", ""), "pool": info.get("pool", ""),
            # whole numbers, as JSON numbers: the registry hands out only whole ones, and
            # leaves out one that is not (None: shown as "?", never a made-up 0)
            "concurrency": _int(info.get("concurrency")),
            # a beat in the future is "just now" (status says the same)
            "heartbeat_age_s": None if beat is None else round(max(0, now - beat) / 1000.0, 1),
            "processed": _int(info.get("processed")), "failed": _int(info.get("failed")),
            "running": _int(info.get("running")),
            "running_ids": _ids(info.get("running_ids")),
            "recycled": _int(info.get("recycled"))})
    # heartbeats too far ahead to be a live worker's (a clock ahead, or a record no
    # worker renews): listed apart, not live, with how far ahead
    ahead = [{"name": info["name"], "id": info["id"], "host": info.get("host", ""),
              "pid": _int(info.get("pid")), "queues": info.get("queues", ""),
              "ahead_s": None if info.get("ahead_ms") is None
              else round(int(info["ahead_ms"]) / 1000.0, 1)} for info in listed.ahead]
    # members that far ahead that are no worker's (no name, no record): named too
    ahead += [{"name": info["member"], "id": "", "foreign": info["why"],
               "ahead_s": None if info.get("ahead_ms") is None
               else round(int(info["ahead_ms"]) / 1000.0, 1)} for info in listed.ahead_foreign]
    return {"app": app.name, "workers": found, "workers_left_out": listed.left_out,
            "ahead": ahead, "ahead_left_out": listed.ahead_left_out,
            "trusted_ahead_s": TRUSTED_AHEAD_MS // 1000}


def listing(app: Minitask, which: str, queues: Optional[List[str]], task: Optional[str],
            state: Optional[str], limit: int, offset: int = 0,
            task_id: Optional[str] = None) -> Dict[str, Any]:
    """``/api/running``, ``/api/scheduled``, ``/api/recent``: what ``minitask inspect``
    lists, read through the same admin functions (a ConfigurationError for a queue
    or state the app does not have).

    A page is ``limit`` tasks after the first ``offset``; ``next_offset`` is the next
    page's (None: no more). ``task_id`` keeps the one task of that id, searched
    among the first PEEK_MOST of each queue (running, scheduled) or the whole record.
    A running task carries its last progress (None: none reported)."""
    # the page, and one more task to know whether a next page exists
    wanted = min(offset + limit + 1, LIST_LIMIT + 1) if task_id is None else (
        MAX_LENGTH if which == "recent" else PEEK_MOST)
    found: Any
    if which == "recent":
        found = recent(app, queues, task=task, state=state, limit=wanted)
    else:
        found = (running if which == "running" else scheduled)(app, queues, task=task,
                                                               limit=wanted)
    tasks = [item for item in found.tasks if task_id is None or item.task_id == task_id]
    page = tasks[offset:offset + limit]
    more = len(tasks) > offset + limit and offset + limit < LIST_LIMIT
    shown = [item.as_dict() for item in page]
    if which == "running":
        for row, progress in zip(shown, progress_of(app, page)):
            row["progress"] = None if progress is None else {
                "current": progress.current, "total": progress.total,
                "message": progress.message, "at": progress.at.isoformat()}
    return {"app": app.name, "listing": which, "total": found.total, "tasks": shown,
            "left_out": found.left_out, "offset": offset, "limit": limit,
            "next_offset": offset + limit if more else None,
            "now": _iso(app.clock.now_ms())}


def worker(app: Minitask, name: str) -> Optional[Dict[str, Any]]:
    """One live worker, by its name (``--name``) or its id, and the outcomes it
    recorded last (from the queues' records); None when no live worker has it."""
    listed: List[Dict[str, Any]] = workers(app)["workers"]
    for info in listed:
        if name in (info["name"], info["id"]):
            ended = recent(app, None, limit=MAX_LENGTH).tasks
            info["recent"] = [entry.as_dict() for entry in ended
                              if entry.worker in (info["id"], info["name"])][:WORKER_RECENT]
            info["now"] = _iso(app.clock.now_ms())
            return info
    return None


def throughput(app: Minitask) -> Dict[str, Any]:
    """Attempts ended per minute and queue over the last hour, and the chart's lines."""
    # the app's clock, as the workers that count the minutes read it; only the queues
    # a listing shows are read (HMGET), however many fields the minutes' hashes hold
    series = app.broker.metrics.throughput(app.clock.now_ms(), 60, shown_queues(app)[0])
    totals: Dict[str, int] = {}
    for _, counts in series:
        for queue, count in counts.items():
            totals[queue] = totals.get(queue, 0) + count
    busiest = sorted(totals, key=lambda queue: (-totals[queue], queue))[:CHART_LINES]
    peak = max([1] + [count for _, counts in series for count in counts.values()])
    step = CHART_WIDTH / max(1, len(series) - 1)
    lines = []
    for index, queue in enumerate(busiest):
        points = " ".join(
            f"{i * step:.1f},{CHART_HEIGHT - counts.get(queue, 0) * CHART_HEIGHT / peak:.1f}"
            for i, (_, counts) in enumerate(series))
        lines.append({"queue": queue, "points": points, "color": COLORS[index % len(COLORS)],
                      "total": totals[queue]})
    return {"app": app.name, "peak_per_minute": peak, "width": CHART_WIDTH,
            "height": CHART_HEIGHT, "lines": lines, "totals": totals,
            "minutes": [{"minute": _iso(minute * 60_000), "counts": counts}
                        for minute, counts in series]}


def task(app: Minitask, task_id: str) -> Optional[Dict[str, Any]]:
    info = inspect(app, task_id)
    if info is None:
        return None
    # the workflow it is a step of ('' none): its page links to /workflow/<id>
    return {**info.as_dict(), "workflow": workflow_of(app, info.queue, task_id)}


def dead(app: Minitask, queue: Optional[str] = None) -> Dict[str, Any]:
    """The oldest ``DEAD_LIMIT`` dead letters of one queue, or of all (queue by queue):
    never more, however many queues have dead letters."""
    counts = {name: counted["dead"]
              for name, counted in app.broker.queues.counts_many(shown_queues(app)[0]).items()}
    found: List[Dict[str, Any]] = []
    for name in [queue] if queue is not None else [q for q in counts if counts[q]]:
        if len(found) >= DEAD_LIMIT:
            break
        # at most HEAD_BYTES of each letter read, its arguments cut as the other
        # listings cut them (1,500 letters of 500 kB made a 49 MB page)
        for row in dead_rows(app, name, limit=DEAD_LIMIT - len(found)):
            letter = row.letter
            found.append({"task_id": letter.task_id, "queue": letter.queue,
                          "task": letter.name, "args": row.args, "cut": row.cut,
                          "message": _line(letter.message),
                          "dead_at": None if letter.unreadable else letter.dead_at.isoformat(),
                          "unreadable": letter.unreadable, "attempts": letter.attempts,
                          "exc_type": letter.exc_type,
                          "reason": letter.reason, "args_hidden": letter.args_hidden})
    return {"app": app.name, "dead": found, "counts": counts, "limit": DEAD_LIMIT}


def schedules(app: Minitask, queue: Optional[str] = None, after: Optional[str] = None,
              limit: int = PAGE_SIZE) -> Dict[str, Any]:
    """A page of ``limit`` schedules of one queue, or of all (queue by queue, in each
    the soonest first, then those with no next tick), from ``after`` (the ``next`` of
    the page before; None: the first), with the count of each queue (one HLEN each):
    what a view reads is bounded by the page, never by how many schedules there are.
    The queues are those the other pages show (``shown_queues``)."""
    shown, left_out = ([queue], 0) if queue is not None else shown_queues(app)
    counts = schedule_counts(app, shown)
    page = schedule_page(app, counts, after, limit)
    found = [{"name": schedule.name, "task": schedule.task, "queue": schedule.queue,
              "cron": schedule.cron, "every": schedule.every, "tz": schedule.tz,
              "next_at": _iso_dt(schedule.next_at), "last_at": _iso_dt(schedule.last_at)}
             for schedule in page.schedules]
    return {"app": app.name, "schedules": found, "unreadable": page.unreadable,
            "counts": {name: count for name, count in counts.items() if count},
            "total": sum(count for count in counts.values() if count > 0),
            "queue": queue, "queues_left_out": left_out, "limit": limit, "after": after,
            "next": page.next, "stopped": page.stopped, "now": _iso(app.clock.now_ms())}


#: Characters of an error message a dead letter's row shows (its first line).
MESSAGE_CHARS = 200


def _line(text: str) -> str:
    """An error message as a row shows it: its first line, cut to MESSAGE_CHARS."""
    line = text.split("\n", 1)[0]
    if len(line) > MESSAGE_CHARS or "\n" in text.rstrip("\n"):
        return line[:MESSAGE_CHARS - 3] + "..."
    return line


def _int(value: Optional[str]) -> Optional[int]:
    """A worker's whole number (at most 2**63 either way, as the registry checks its
    counts); None when it wrote none that is one."""
    return whole(value, -2 ** 63, 2 ** 63)


def _ids(value: Optional[str]) -> Optional[List[str]]:
    """The task ids a heartbeat lists as running (a JSON list of strings), at most
    SHOWN_RUNNING; [] for none or a worker that lists none (an older minitask); None
    when the list cannot be read (the registry leaves out one longer than a worker
    writes; nested too deep for the parser; not JSON). Each id is cut as ``shown_id``
    cuts one longer than any producer sends."""
    try:
        found = json.loads(value) if value else []
    except (ValueError, RecursionError):
        return None
    if not isinstance(found, list):
        return None
    return [shown_id(str(item)) for item in found[:SHOWN_RUNNING]]


def _iso(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.timezone.utc).isoformat()


def _iso_dt(value: Optional[_dt.datetime]) -> Optional[str]:
    return None if value is None else value.isoformat()


def now_iso(app: Minitask) -> str:
    """The app's clock now, ISO 8601 (what a page's relative times count from)."""
    return _iso(app.clock.now_ms())
