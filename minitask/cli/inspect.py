"""``minitask inspect``: one task by its id, or what is running, scheduled or
recently ended across the app's queues."""
from __future__ import annotations

import argparse
import datetime as _dt
from typing import Any, List, Optional

from ..admin import LOOKUP_OTHERS, UNREADABLE, TaskInfo, inspect, lookup_queues
from ..admin.activity import (LIMIT_MOST, STATE_WORDS, Listing, check_pattern, recent, running,
                              scheduled)
from ..admin.workflows import summary, waiting_step, workflow
from ..errors import ConfigurationError, error_said
from ..printable import printable, shown_trace
from ..wire.message import MAX_ID_BYTES, describe_char, unprintable
from .options import (Bounded, add_app_options, check_given, close_word, emit_json,
                      known, load, takes_words, unknown_word)

USAGE = ("minitask inspect -A APP (ID | --id ID | running | scheduled | recent | "
         "workflow ID) [--queue Q] [--task NAME] [--state S] [--limit N] [--json]")
#: The words that list tasks instead of naming one; an id that is one of them is
#: given with --id.
LISTINGS = ("running", "scheduled", "recent")
#: Every word ``inspect`` takes in place of an id (``workflow`` is followed by one).
WORDS = LISTINGS + ("workflow",)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "inspect", usage=USAGE, help="show one task by its id, or list running, scheduled "
        "or recent tasks",
        description="With an id: a task's status, queue, arguments, deliveries and outcome "
        "(value, or error and traceback). With running (tasks workers hold now), scheduled "
        "(due later: delayed, or waiting for a retry) or recent (the last outcomes each "
        "queue keeps: succeeded, retried, dead, cancelled): a list across the app's "
        "queues. With workflow ID (a workflow's handle id, as each step's task page "
        "names it): its chain, group or chord, each step with its state. An id that is "
        "one of these words is given with --id.")
    add_app_options(parser, level="WARNING")
    parser.add_argument("--id", dest="task_id", default=None, metavar="ID",
                        help="the task to show, whatever its id looks like")
    parser.add_argument("--queue", action="append", default=None, metavar="Q",
                        help="only this queue (repeat for more; default: every queue)")
    parser.add_argument("--task", default=None, metavar="NAME",
                        help="only tasks of this name, or of names matching a glob (a.*)")
    parser.add_argument("--state", default=None, choices=STATE_WORDS,
                        help="recent only: this outcome (failed: retried or dead)")
    parser.add_argument("--limit", type=Bounded(1, LIMIT_MOST), default=50, metavar="N",
                        help=f"list at most N tasks (default 50, at most {LIMIT_MOST:,})")
    parser.add_argument("--json", action="store_true", help="print JSON")
    takes_words(parser)
    parser.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    for queue in args.queue or ():
        check_given("queue", queue)
    check_pattern(args.task)  # its length first: a refusal does not echo 60 kB
    check_given("task", args.task)
    if args.task_id is None and args.words[:1] == ["workflow"]:
        return _workflow(args)
    words = list(args.words) + ([] if args.task_id is None else [args.task_id])
    if args.task_id is None and words and close_word(words[0], WORDS):  # ids: 22 characters
        raise ConfigurationError(unknown_word("listing", words[0], WORDS,
                                              "; an id that looks like one goes after --id"))
    if len(words) != 1:
        raise ConfigurationError(f"name one task id, one of {', '.join(LISTINGS)}, or "
                                 f"workflow and its id (usage: {USAGE})")
    if args.task_id is None and words[0] in LISTINGS:
        return _list(args, words[0])
    if args.state is not None or args.task is not None or args.queue is not None:
        raise ConfigurationError(f"--queue, --task and --state filter a list "
                                 f"({', '.join(LISTINGS)}), not one task by its id")
    task_id = _checked_id(words[0], "task id")
    app = load(args.app)
    try:
        asked, not_asked = lookup_queues(app)  # read once: the lookup and what it said
        info = inspect(app, task_id, asked)
        # no queue holds it: a workflow's step not sent yet (its handle's id names the plan)
        found = workflow(app, task_id, asked, say=False) if info is None else None
    finally:
        app.close()
    if found is not None and waiting_step(found, task_id):
        return _pending(task_id, found, args.json)
    if info is None:
        if args.json:
            emit_json({"task_id": task_id, "status": "unknown", "queues_asked": len(asked),
                       "queues_not_asked": not_asked})
        else:
            print(f"task {printable(task_id)}: unknown to app {app.name!r} (never enqueued on "
                  f"this broker, or its result expired{_past_cap(task_id, 'task')})" + (
                      f"; not found among the {len(asked)} queues looked at (the app's own "
                      f"and {LOOKUP_OTHERS} of its queue registry): {not_asked} more queue(s) "
                      f"in the registry were not" if not_asked else ""))
        return 1
    if args.json:
        emit_json(info.as_dict())
    else:
        print("\n".join(describe(info)))
    return 0


def _pending(task_id: str, found: Any, as_json: bool) -> int:
    """``inspect ID`` of a workflow's step not sent yet: what it waits for."""
    others = dict(found["counts"])
    others["pending"] = others.get("pending", 1) - 1  # not counting itself
    waits = {state: count for state, count in sorted(others.items()) if count}
    if as_json:
        emit_json({"task_id": task_id, "status": "pending", "workflow": found["id"],
                   "kind": found["kind"], "waits_for": waits})
        return 0
    now = ", ".join(f"{count} {state}" for state, count in waits.items()) or "none"
    print(printable(f"task {task_id}: pending: the last step of workflow {task_id} "
                    f"({summary(found)}), not sent yet: it is sent once the steps before "
                    f"it end (the other steps now: {now}); see minitask inspect workflow "
                    f"{task_id}"))
    return 0


def _checked_id(some_id: str, what: str) -> str:
    """An id as given, refused in one line when no task or workflow can have it: blank,
    or holding a control or format character (a byte that is not UTF-8 reads as a
    lone surrogate: no key can be named with it)."""
    if not some_id.strip():
        raise ConfigurationError(f"inspect: the {what} {some_id!r} is blank; name one")
    char = unprintable(some_id)
    if char is not None:
        raise ConfigurationError(f"inspect: the {what} {some_id!r} holds "
                                 f"{describe_char(char)}, a control or format character (or "
                                 f"a byte that is not UTF-8); no {what.split()[0]} has such "
                                 f"an id: use printable characters")
    return some_id


def _past_cap(some_id: str, what: str) -> str:
    """Why an id is unknown when it is longer than any minitask gives (it is still
    looked up: data another program wrote may have one), or ''."""
    size = len(some_id.encode("utf-8", "surrogatepass"))
    if size <= MAX_ID_BYTES:
        return ""
    return (f"; and no {what} minitask sends has an id of {size:,} bytes: the most is "
            f"{MAX_ID_BYTES} (wire.message.MAX_ID_BYTES)")


def _list(args: argparse.Namespace, which: str) -> int:
    if args.state is not None and which != "recent":
        raise ConfigurationError(f"--state filters recent outcomes, not {which} tasks")
    app = load(args.app)
    try:
        if not all([known(app, queue) for queue in args.queue or ()]):
            return 1  # something named was not found, as dead and purge say it
        if which == "recent":
            listing = recent(app, args.queue, task=args.task, state=args.state,
                             limit=args.limit)
        else:
            listing = (running if which == "running" else scheduled)(
                app, args.queue, task=args.task, limit=args.limit)
    finally:
        app.close()
    if args.json:
        emit_json({"listing": which, "total": listing.total,
                   **({"left_out": listing.left_out} if which == "recent" else {}),
                   "tasks": [item.as_dict() for item in listing.tasks]})
        return 0
    now = _dt.datetime.now(_dt.timezone.utc)
    if which == "recent" and not listing.tasks and not listing.left_out \
            and not app.recent_outcomes:
        print(f"no recent outcomes: app {app.name!r} keeps no record of them "
              f"(recent_outcomes=0)")
        return 0
    print("\n".join(_table(which, listing, now)))
    return 0


def _left_out(listing: Listing) -> List[str]:
    """What a recent listing says of the entries it left out (none: nothing)."""
    if not listing.left_out:
        return []
    entries = "1 entry" if listing.left_out == 1 else f"{listing.left_out:,} entries"
    return [f"{entries} of the record left out as unreadable: data minitask did not "
            f"write (the log names the key)"]


def _table(which: str, listing: Listing, now: _dt.datetime) -> List[str]:
    if not listing.tasks and which == "recent" and listing.left_out:
        return ["no recent outcome to show:", *_left_out(listing)]
    if not listing.tasks:
        return [f"no {which} tasks" if which != "recent" else "no recent outcomes"]
    if which == "recent":
        lines = [f"{'when':<22} {'state':<10} {'queue':<12} {'task id':<24} {'task':<26} "
                 f"{'attempt':>7} {'took':>8}  worker / error"]
        for entry in listing.tasks:
            tail = entry.worker + (" / " if entry.worker and entry.error else "") + entry.error
            took = "" if entry.duration is None else _duration(entry.duration)
            lines.append(printable(
                f"{_when(entry.at, now):<22} {entry.state:<10} {entry.queue:<12} "
                f"{entry.task_id:<24} {entry.name:<26} {entry.attempt or '':>7} {took:>8}  "
                f"{_cut(tail, 70)}"))
        lines.append(f"\n{len(listing.tasks)} shown of the last {listing.total} outcome(s) "
                     f"read")
        return lines + _left_out(listing)
    label = "lease until" if which == "running" else "due"
    lines = [f"{label:<22} {'queue':<12} {'task id':<24} {'task':<26} {'attempt':>7}  args"]
    for item in listing.tasks:
        when = "unreadable (below)" if item.unreadable else _when(item.at, now)
        lines.append(printable(
            f"{when:<22} {item.queue:<12} {item.task_id:<24} {item.name:<26} "
            f"{item.attempt or '':>7}  {item.args}"))
    lines.append(f"\n{len(listing.tasks)} shown of {listing.total} {which}")
    lines += [printable(f"task {item.task_id}: {item.unreadable} (data minitask did not "
                        f"write: inspect it with redis-cli, then fix or delete it)")
              for item in listing.tasks if item.unreadable]
    return lines


def _when(at: Optional[_dt.datetime], now: _dt.datetime) -> str:
    """A time as people read it: the clock time, and how far from now."""
    if at is None:
        return "?"
    seconds = (at - now).total_seconds()
    far = _duration(abs(seconds))
    relative = f"in {far}" if seconds > 0.5 else ("now" if seconds > -0.5 else f"{far} ago")
    shown = f"{at:%H:%M:%S}" if abs(seconds) < 86400 else f"{at:%Y-%m-%d %H:%M}"
    return f"{shown} ({relative})"


def _duration(seconds: float) -> str:
    """Seconds as people read them: 0.25 s, 42 s, 3 min 20 s, 5 h 02 min, 3 d 4 h."""
    if seconds < 10:
        return f"{seconds:.2f} s" if seconds < 1 else f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def _cut(text: str, width: int) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[:width - 3] + "..."


def describe(info: TaskInfo) -> List[str]:
    status = (f"{info.status} ({info.held})" if info.held else
              f"{info.status} ({UNREADABLE})" if info.unreadable else info.status)
    lines = [f"task id      {printable(info.task_id)}", f"status       {printable(status)}",
             f"queue        {printable(info.queue)}"]
    shown = [("task", info.name), ("args", info.args), ("kwargs", info.kwargs),
             ("priority", info.priority), ("attempt", info.attempt),
             ("deliveries", info.deliveries or None), ("enqueued at", info.enqueued_at),
             ("eta", info.eta), ("due at", info.due_at), ("lease until", info.lease_until),
             ("finished at", info.finished_at), ("reason", info.reason or None),
             ("note", info.note or None)]
    for label, value in shown:
        if value is None or value == "":
            continue
        text = value.isoformat() if hasattr(value, "isoformat") else (
            repr(value) if label in ("args", "kwargs") else str(value))
        lines.append(f"{label:<12} {printable(text)}")
    if info.args_hidden:
        lines.insert(4, f"{'args':<12} (hidden: the task has hide_args=True)")
    if info.progress is not None:
        shown_total = "" if info.progress.total is None else f" / {info.progress.total}"
        note = "" if info.progress.message is None else f"  {info.progress.message}"
        lines.append(printable(f"{'progress':<12} {info.progress.current}{shown_total}{note}  "
                               f"(at {info.progress.at.isoformat()})"))
    if info.status == "succeeded":
        lines.append(printable(f"{'value':<12} {info.value!r}"))
    if info.exc_type:
        lines.append(printable(f"{'error':<12} {error_said(info.exc_type, info.message)}"))
    if info.traceback:
        lines += ["", shown_trace(info.traceback, info.message)]
    return lines


def _workflow(args: argparse.Namespace) -> int:
    """``inspect workflow ID``: the workflow's tree, a line per step."""
    if len(args.words) != 2 or not args.words[1] or args.queue or args.task or args.state:
        raise ConfigurationError(f"inspect workflow takes one workflow id (not empty) and "
                                 f"no filters (usage: {USAGE})")
    workflow_id = _checked_id(args.words[1], "workflow id")
    app = load(args.app)
    try:
        found = workflow(app, workflow_id, say=False)  # (its error is printed, once)
    finally:
        app.close()
    if found is None:
        if args.json:
            emit_json({"id": workflow_id, "found": False})
        else:
            print(f"workflow {printable(workflow_id)}: unknown to app {app.name!r} (not sent "
                  f"on this broker, sent by an older minitask, or expired with its results"
                  f"{_past_cap(workflow_id, 'workflow')})")
        return 1
    if args.json:
        emit_json(found)
        return 0
    counts = ", ".join(f"{count} {state}" for state, count in sorted(found["counts"].items()))
    of_kept = "of those kept: " if found["left_out"] else ""
    errbacks = f", {found['errbacks']} error callback(s)" if found["errbacks"] else ""
    print(printable(f"workflow {workflow_id}: {summary(found)} ({of_kept}{counts}){errbacks}"))
    print("\n".join(_tree(found["root"], "  ")))
    return 0


def _tree(node: Any, indent: str) -> List[str]:
    return _shape(node, indent) + [
        line for errback in node["on_error"]
        for line in _shape(errback, indent + "  on error ")] + (
        [f"{indent}  on error ... {node['on_error_more']} more not kept in the plan"]
        if node["on_error_more"] else [])


def _shape(node: Any, indent: str) -> List[str]:
    kind = node["kind"]
    if kind == "task":
        return [printable(f"{indent}{node['state']:<10} {node['task']:<26} {node['id']:<24} "
                          f"{node['queue']}")]
    more = [f"{indent}  ... {node['more']} more not kept in the plan"] if node["more"] else []
    if kind == "chain":
        return [f"{indent}chain"] + [line for step in node["steps"]
                                     for line in _tree(step, indent + "  ")] + more
    parts = node["members"] if kind == "group" else node["header"]
    lines = [printable(f"{indent}{kind} {node['id']}")]
    lines += [line for part in parts for line in _tree(part, indent + "  ")] + more
    if kind == "chord":
        lines += [f"{indent}then"] + _tree(node["body"], indent + "  ")
    return lines
