"""Write the golden samples of this minitask version: what it puts in Redis.

Run from the repository root, once per release whose formats a later one must read:

    .venv/bin/python -m tests.golden.make_golden

It writes ``tests/golden/<version>/`` (the version is ``minitask.__version__``;
an existing folder is refused: samples are history, never rewritten):

* ``layout.json``: the whole Redis keyspace (tests/golden/layout.py's form) of the
  app in tests/apps/golden.py after, on fakeredis and a manual clock: a subscriber
  ``web-1`` of the ``config`` queue; a task run to its result and one dead-lettered;
  then, left waiting, a plain task, a task with nested arguments on a priority queue,
  one ``apply_in(60)``, a chain, a chord, a broadcast call, and an ``every`` schedule.
* ``*.bin``: single records as written: messages (plain, nested arguments, a chain
  step with its workflow frame, one with a trace context), outcomes (succeeded,
  dead), the schedule record and the broadcast call.
* ``manifest.json``: the ids of what was written and what reading each must give;
  tests/unit/test_golden.py checks the current code against it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict

import fakeredis

import minitask
from minitask import chain, chord, group
from minitask.wire.message import Message
from minitask.wire.serializer import encode_message
from tests.apps.golden import ECHOED, golden_app
from tests.golden.layout import dump
from tests.support.clock import ManualClock

HERE = Path(__file__).resolve().parent
#: the manual clock's start: the test restores layouts at the same instant
START_MS = 1_800_000_000_000
PREFIX = "minitask:"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _hash_field(client: Any, key: str, field: str) -> bytes:
    value = client.hget(key, field)
    if value is None:
        raise SystemExit(f"make_golden: {key} holds no field {field}")
    return bytes(value)


def make(folder: Path) -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    clock = ManualClock(START_MS)
    app = golden_app(client, clock)
    add, total, fail, echo, reload = (app.tasks[f"golden.{name}"] for name in
                                      ("add", "total", "fail", "echo", "reload"))
    app.worker(queues=["config"], burst=True, subscriber="web-1").run()  # subscribes

    done = add.delay(40, 2)
    dead = fail.delay("golden failure")
    app.worker(queues=["default"], burst=True).run()
    clock.advance(1.0)

    queued = add.delay(2, 3)
    nested = echo.delay(ECHOED)
    later = add.apply_in(60.0, 1, 1)
    steps = chain(add.s(1, 2), add.s(10)).delay()
    joined = chord(group(add.s(i, i) for i in range(3)), total.s()).delay()
    call = reload.delay(7)
    app.add_schedule("golden-every-hour", add, every=3600.0, args=(3, 4))

    keys = {"default": f"{PREFIX}{{golden:default}}", "urgent": f"{PREFIX}{{golden:urgent}}",
            "config": f"{PREFIX}{{golden:config}}"}
    samples: Dict[str, bytes] = {
        "message-plain": _hash_field(client, f"{keys['default']}:messages", queued.id),
        "message-nested": _hash_field(client, f"{keys['urgent']}:messages", nested.id),
        "message-traced": encode_message(Message(
            id="golden-traced", task="golden.add", args=[5, 6], kwargs={}, queue="default",
            priority=5, enqueued_at_ms=START_MS, trace={
                "traceparent": TRACEPARENT})),
        "outcome-succeeded": bytes(client.lindex(f"{keys['default']}:result:{done.id}", 0)),
        "outcome-dead": bytes(client.lindex(f"{keys['default']}:result:{dead.id}", 0)),
        "schedule-record": _hash_field(client, f"{keys['default']}:schedules",
                                       "golden-every-hour"),
        "broadcast-call": _hash_field(client, f"{keys['config']}:bcast:bodies", call.id),
    }
    workflow_bodies = [body for task_id, body in client.hgetall(
        f"{keys['default']}:messages").items() if task_id.decode() not in {queued.id}]
    chained = [body for body in workflow_bodies if b"\xa2wf" in body]
    if not chained:
        raise SystemExit("make_golden: no workflow step found among the messages")
    samples["message-workflow"] = sorted(chained)[0]

    folder.mkdir(parents=True)
    for name, data in samples.items():
        (folder / f"{name}.bin").write_bytes(data)
    (folder / "layout.json").write_text(json.dumps(dump(client), indent=1, sort_keys=True)
                                        + "\n")
    manifest = {
        "version": minitask.__version__,
        "start_ms": START_MS,
        "now_ms": clock.now_ms(),
        "done": {"id": done.id, "value": 42},
        "dead": {"id": dead.id, "queue": "default", "exc_type": "ValueError",
                 "message": "golden failure"},
        "traced": {"trace": {"traceparent": TRACEPARENT}},
        "queued": {"id": queued.id, "value": 5},
        "nested": {"id": nested.id, "queue": "urgent"},
        "later": {"id": later.id, "value": 2, "delay": 60.0},
        "chain": {"id": steps.id, "value": 13},
        "chord": {"id": joined.id, "value": 6},
        "broadcast": {"id": call.id, "queue": "config", "subscriber": "web-1",
                      "value": "version 7 loaded"},
        "schedule": {"name": "golden-every-hour", "task": "golden.add", "every": 3600.0,
                     "args": [3, 4]},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"make_golden: wrote {len(samples)} records and {len(dump(client))} keys "
          f"to {folder}")


def main() -> int:
    folder = HERE / minitask.__version__
    if folder.exists():
        print(f"make_golden: {folder} exists; the samples of a version are never rewritten",
              file=sys.stderr)
        return 1
    make(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
