"""``minitask status``: queues and live workers."""
from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List, Optional

from ..admin import (LIVE_MS, SHOWN_OTHERS, SHOWN_WORKERS, TRUSTED_AHEAD_MS,
                     all_queue_counts, shown_queues, stalled_queues, worker_listing)
from ..broker.health import connected_replicas, on_redis_time, replica_warning, skew_warning
from ..printable import printable
from .options import add_app_options, load

#: Broadcast subscribers shown per queue, the furthest behind first.
SHOWN_SUBSCRIBERS = 100


def register(commands: Any) -> None:
    status = commands.add_parser(
        "status", help="show queues and live workers",
        description="For each queue of the app, its tasks ready (by priority), scheduled, "
        "running and dead; then the live workers, with their last heartbeat and counts.")
    add_app_options(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    app = load(args.app)
    broker = app.broker
    # the queues the app declares and at most SHOWN_OTHERS more (20,000 planted names
    # in the registry took 18 s)
    invalid = [0]  # of those left out, the members that name no queue (the rest: the cap)
    queues, left_out = shown_queues(app, invalid=invalid)
    # heartbeats are on Redis's clock (worker/redis_time.py): their ages are read on it
    # too, or a machine whose clock is ahead would count no worker live
    skew = on_redis_time(app.clock, broker.client)
    now_ms = app.clock.now_ms()
    report: Dict[str, Any] = {
        "app": app.name, "broker": broker.description,
        # a few round trips whatever the number of queues (a batch per queue took 26 s
        # for a registry of 20,000 names)
        "queues": all_queue_counts(app, queues),
        "queues_left_out": left_out,
        # why: past the listing's cap, or no queue name (not UTF-8, a control character...)
        "queues_left_out_why": {"past_limit": max(0, left_out - invalid[0]),
                                "not_a_queue_name": min(left_out, invalid[0])},
        "workers": [],
        "subscribers": {},
        "subscribers_left_out": {},
    }
    _subscribers(app, queues, now_ms, report)
    # at most SHOWN_WORKERS, those that beat last (20,000 planted members took 2 s)
    listed = worker_listing(app)
    report["workers_left_out"] = listed.left_out
    # why, for each: past the cap, a record expired with its worker, no worker's at all
    report["workers_left_out_why"] = {
        "past_limit": listed.past_limit, "record_gone": listed.gone,
        "not_minitask": listed.left_out - listed.past_limit - listed.gone}
    # records whose heartbeat is too far ahead to be a live worker's: apart, not live
    report["workers_ahead"] = [{
        "name": info["name"], "id": info["id"], "host": info.get("host", ""),
        "pid": None if info.get("pid") is None else int(info["pid"]),
        "queues": info.get("queues", ""),
        "ahead_s": None if info.get("ahead_ms") is None else int(info["ahead_ms"]) / 1000.0,
        "clock_skew_ms": (None if info.get("clock_skew_ms") is None
                          else int(info["clock_skew_ms"]))} for info in listed.ahead]
    report["workers_ahead_left_out"] = listed.ahead_left_out
    # members that far ahead that are no worker's (no name, no record): named, apart
    report["workers_ahead_foreign"] = [{
        "member": info["member"], "why": info["why"],
        "ahead_s": None if info.get("ahead_ms") is None else int(info["ahead_ms"]) / 1000.0}
        for info in listed.ahead_foreign]
    for info in listed.live:
        # the registry hands out only whole numbers in these fields, and leaves out one
        # that is not (said once in the log): None, shown as "?", never a made-up 0
        count = {field: None if info.get(field) is None else int(info[field])
                 for field in ("pid", "beat_ms", "processed", "failed", "running", "recycled",
                               "overrun", "unconfirmed", "unconfirmed_ms")}
        report["workers"].append({
            "name": info["name"], "id": info.get("id", info["name"]),
            "host": info.get("host", ""), "pid": count["pid"],
            "queues": info.get("queues", ""), "pool": info.get("pool", ""),
            # a beat in the future (a clock ahead, or planted) is "just now", never a
            # negative age
            "heartbeat_age_s": None if count["beat_ms"] is None else round(
                max(0, now_ms - count["beat_ms"]) / 1000.0, 3),
            "processed": count["processed"], "failed": count["failed"],
            "running": count["running"], "recycled": count["recycled"],
            # asyncio pool: coroutines left running past their cancel, each holding a slot
            "overrun": count["overrun"],
            # outcome writes replicas left unconfirmed in the outage going on (durability)
            "unconfirmed": count["unconfirmed"],
            "unconfirmed_age_s": None if not count["unconfirmed_ms"] else round(
                max(0, now_ms - count["unconfirmed_ms"]) / 1000.0, 3),
            # checked by the registry: a whole number of ms, at most MAX_MS either way
            "clock_skew_ms": (None if info.get("clock_skew_ms") is None
                              else int(info["clock_skew_ms"])),
        })
    # queues whose every fetch Redis refuses, as the workers say (a key of the queue
    # they cannot recover from): shown beside the queue, not only in a worker's log
    report["stalled"] = stalled_queues(listed.live)
    report["warnings"] = _warnings(app, skew, report["workers"] + report["workers_ahead"])
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(_status_text(report))
    return 0


def _warnings(app: Any, skew: Optional[int], workers: List[Dict[str, Any]]) -> List[str]:
    """What is only ever slow or wrong, never an error: clocks far from Redis's, a
    durability setting the replicas cannot meet."""
    durability = app.durability
    client = app.broker.client
    found = [skew_warning(skew, "this machine's"),
             replica_warning(durability.mode, durability.min_replicas,
                             connected_replicas(client) if durability.mode else None,
                             durability.timeout)]
    found += [skew_warning(worker["clock_skew_ms"], f"worker {printable(worker['name'])}'s",
                           corrected=True)  # (it goes by Redis's time: worker/redis_time.py)
              for worker in workers]
    return [warning for warning in found if warning is not None]


def _subscribers(app: Any, queues: List[str], now_ms: int, report: Dict[str, Any]) -> None:
    """Per queue with broadcast subscribers: at most SHOWN_SUBSCRIBERS, the furthest
    behind first, each with its lag and last-seen age, and how many are not shown
    (200,000 subscribers took 13.6 s and 10.9 MB of output)."""
    for queue in queues:
        if ":" in queue:
            continue  # a subscriber's lane: listed as a queue above
        shown, count = app.broker.broadcasts.few(queue, SHOWN_SUBSCRIBERS)
        rows = [{"name": c.name, "lag": c.lag,
                 "last_seen_age_s": None if c.last_seen_ms is None else
                 round(max(0, now_ms - c.last_seen_ms) / 1000.0, 3)}
                for c in shown]
        if rows:
            report["subscribers"][queue] = rows
        if count > len(rows):
            report["subscribers_left_out"][queue] = count - len(rows)


def _held_lines(counts: Dict[str, Any]) -> List[str]:
    """The lines under a queue's counts that say which of its ready tasks wait on
    something else than a worker: parked by their limits (flow control), grouped (fair
    queues), and in paused groups (bounded: a count, then the names read)."""
    lines = []
    if counts.get("parked"):
        lines.append(f"{'':<20} {counts['parked']} of them parked by their limits "
                     f"(rate_limit, max_running): not in the priority lists")
    paused = {group for group, _ in counts.get("paused_shown", ())}
    if counts.get("groups"):
        largest = ", ".join(f"{printable(group)}={ready}"
                            + (" (paused)" if group in paused else "")
                            for group, ready in counts["largest_groups"])
        lines.append(f"{'':<20} {counts['grouped']} ready in {counts['groups']} "
                     f"group(s); largest: {largest}")
    if counts.get("dead_trimmed"):
        lines.append(f"{'':<20} {counts['dead_trimmed']} dead letter(s) deleted, oldest "
                     f"first: past dead_letters_max or dead_letters_ttl")
    if counts.get("paused_groups"):
        named = ", ".join(f"{printable(group)}={ready}"
                          for group, ready in counts["paused_shown"])
        more = counts["paused_groups"] - len(counts["paused_shown"])
        lines.append(f"{'':<20} {counts['paused_groups']} paused group(s), held until "
                     f"resume_group: {named}" + (f" and {more} more" if more > 0 else ""))
    return lines


def _status_text(report: Dict[str, Any]) -> str:
    lines: List[str] = [f"app {printable(report['app'])} on {printable(report['broker'])}"]
    lines += [f"warning: {warning}" for warning in report["warnings"]]
    lines += ["", f"{'queue':<20} {'ready':>7} {'scheduled':>9} {'running':>7} "
                  f"{'dead':>6}  ready by priority"]
    for queue, counts in report["queues"].items():
        by_priority = " ".join(f"p{p}={n}" for p, n in counts["ready_by_priority"].items())
        lines.append(f"{printable(queue):<20} {counts['ready']:>7} {counts['scheduled']:>9} "
                     f"{counts['running']:>7} {counts['dead']:>6}  {by_priority or '-'}")
        lines += _held_lines(counts)
        if queue in report.get("stalled", {}):
            lines.append(f"  STALLED: Redis refuses every fetch of it: "
                         f"{printable(report['stalled'][queue])}")
    if report.get("queues_left_out"):
        why = report["queues_left_out_why"]
        reasons = ([f"{why['past_limit']} past the listing's limit (only the queues the app "
                    f"declares and {SHOWN_OTHERS} others are shown)"] if why["past_limit"]
                   else []) + ([f"{why['not_a_queue_name']} that name no queue (not UTF-8, "
                                f"or a character no queue name has; said in the log)"]
                               if why["not_a_queue_name"] else [])
        lines.append(f"... and {report['queues_left_out']} more queue(s) in the app's queue "
                     f"registry, not shown: {'; '.join(reasons)}")
    # (all of them: those past the listing's cap are live too)
    live = len(report["workers"]) + report["workers_left_out_why"]["past_limit"]
    lines += ["", f"{live} live worker(s)"
              + (" (processed: tasks that succeeded; failed: attempts that failed, retried "
                 "or dead)" if report["workers"] else "")]
    for worker in report["workers"]:
        named = worker["name"] if worker["name"] == worker["id"] else (
            f"{worker['name']} ({worker['id']})")  # workers may share a --name
        age = worker["heartbeat_age_s"]
        shown = {key: "?" if worker[key] is None else worker[key]
                 for key in ("processed", "failed", "running", "recycled")}
        lines.append(f"  {printable(named)}  "
                     f"heartbeat {'unreadable' if age is None else f'{age:.1f} s ago'}  "
                     f"processed {shown['processed']}  failed {shown['failed']}  "
                     f"running {shown['running']}  "
                     + (f"recycled {shown['recycled']}  " if worker["pool"] == "process"
                        else "") + f"queues {printable(worker['queues'])}")
        lines += _trouble_lines(worker)
    if report.get("workers_left_out"):
        lines.append(f"  ... and {report['workers_left_out']} more in the worker registry, "
                     f"not shown: {_left_out_why(report['workers_left_out_why'])}")
    lines += _ahead_text(report)
    for queue, rows in report["subscribers"].items():
        lines += ["", f"broadcast subscribers of queue {printable(queue)} "
                      f"(lag: calls not pulled yet)"]
        for row in rows:
            age = row["last_seen_age_s"]
            seen = "never seen" if age is None else f"last seen {age:.1f} s ago"
            lines.append(f"  {printable(row['name'])}  lag {row['lag']}  {seen}")
        left = report["subscribers_left_out"].get(queue)
        if left:
            lines.append(f"  ... and {left} more subscriber(s), not shown (only the "
                         f"{SHOWN_SUBSCRIBERS} furthest behind are read; app.subscribers() "
                         f"lists them all)")
    return "\n".join(lines)


def _trouble_lines(worker: Dict[str, Any]) -> List[str]:
    """What a worker's heartbeat says is going wrong: coroutines it left running past
    their cancel (each holding a slot), writes replicas leave unconfirmed."""
    lines = []
    for key, said in (("overrun", "LEFT RUNNING"), ("unconfirmed", "UNCONFIRMED")):
        if worker.get(key, 0) is None:  # no whole number: unreadable, never a made-up 0
            lines.append(f"    {said}: unreadable (the heartbeat's {key} field is no whole "
                         f"number)")
    if worker.get("overrun"):
        lines.append(f"    LEFT RUNNING: {worker['overrun']} task(s) whose coroutine went on "
                     f"past its time limit or cancel, each holding a slot until it ends "
                     f"(its log names them; restart the worker to end them)")
    if worker.get("unconfirmed"):
        age = worker.get("unconfirmed_age_s")
        lines.append(f"    UNCONFIRMED: {worker['unconfirmed']} outcome write(s) not "
                     f"confirmed by replicas in time"
                     + ("" if age is None else f", the last {age:.1f} s ago")
                     + " (a replica is down or behind: a failover may lose them)")
    return lines


def _left_out_why(why: Dict[str, int]) -> str:
    """Why live members of the worker registry were not shown, each reason counted."""
    said = []
    if why["past_limit"]:
        said.append(f"{why['past_limit']} past the {SHOWN_WORKERS} that beat last (only "
                    f"those are read)")
    if why["record_gone"]:
        said.append(f"{why['record_gone']} whose record has expired (its worker stopped "
                    f"without leaving the registry: killed, or cut off from Redis; it "
                    f"leaves {LIVE_MS // 1000} s after its last heartbeat)")
    if why["not_minitask"]:
        said.append(f"{why['not_minitask']} that no worker wrote (no worker name, or a "
                    f"record minitask does not write: said in the log)")
    return "; ".join(said)


def _ahead_text(report: Dict[str, Any]) -> List[str]:
    """The registry's records whose heartbeat lies ahead of this machine's clock, further
    than a live worker's can: each with how far, and what to do."""
    ahead, more = report["workers_ahead"], report["workers_ahead_left_out"]
    foreign = report["workers_ahead_foreign"]
    if not ahead and not more and not foreign:
        return []
    lines = ["", f"{len(ahead) + len(foreign) + more} worker record(s) with a heartbeat "
                 f"more than "
                 f"{TRUSTED_AHEAD_MS // 1000} s ahead of this machine's clock, not counted "
                 f"live (a worker whose clock runs ahead: set it right, with NTP; or a "
                 f"record no worker renews: it stays until its heartbeat time passes)"]
    for worker in ahead:
        named = worker["name"] if worker["name"] == worker["id"] else (
            f"{worker['name']} ({worker['id']})")
        far = ("unreadable (no time)" if worker["ahead_s"] is None
               else f"{worker['ahead_s']:.1f} s ahead")
        lines.append(f"  {printable(named)}  heartbeat {far}  host "
                     f"{printable(worker['host']) or '?'}  pid "
                     f"{'?' if worker['pid'] is None else worker['pid']}  "
                     f"queues {printable(worker['queues'])}")
    for member in foreign:  # (escaped already, as a log line names it)
        far = ("unreadable (no time)" if member["ahead_s"] is None
               else f"{member['ahead_s']:.1f} s ahead")
        lines.append(f"  {member['member']}  heartbeat {far}  {member['why']}: no worker "
                     f"wrote this member (it stays until its heartbeat time passes; "
                     f"ZREM it from the registry to remove it now)")
    if more:
        lines.append(f"  ... and {more} more, not shown")
    return lines
