"""A runtime error of the fetch script in one queue's fetch sets that queue aside (its
own backoff, a warning naming it); the worker's other queues keep flowing. Before, any
script error other than WRONGTYPE took the whole-server outage path: the worker backed
off every fetch, and a queue after the failing one was never served.

No data planted in a queue's keys is known to make the fetch script raise a runtime
error (the scripts guard what they read: tests/unit/test_fetch_keys_never_error.py
searches for one); here the real fetch.lua, on a real Redis, meets an argument it
cannot read for queue "a" only, and raises its real runtime error."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from minitask import Minitask
from minitask.broker.packing import ScriptCall
from minitask.worker import outages

pytestmark = [pytest.mark.integration, pytest.mark.app("aside", on="server")]

DEADLINE = 30.0


def test_a_script_error_in_one_queues_fetch_leaves_the_other_queues_flowing(
        app: Minitask, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    @app.task(name="job")
    def job(n: int) -> int:
        return n * 2

    stuck = [job.apply_async((n,), queue="a") for n in range(3)]
    queues = app.broker.queues
    sound = queues.fetch_call

    def fetch_call(queue: str, now_ms: Any, terms: Any) -> ScriptCall:
        name, shard, keys, args, count = sound(queue, now_ms, terms)
        if queue == "a":  # a count the script cannot read: "attempt to perform arithmetic"
            args = (args[0], args[1], b"many", *args[3:])
        return (name, shard, keys, args, count)

    monkeypatch.setattr(queues, "fetch_call", fetch_call)
    caplog.set_level(logging.WARNING, logger=outages.logger.name)
    worker = app.worker(["a", "b"], concurrency=2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        flowing = [job.apply_async((n,), queue="b") for n in range(5)]
        assert [handle.get(timeout=DEADLINE) for handle in flowing] == [0, 2, 4, 6, 8]
        took = time.monotonic() - started
        later = job.apply_async((10,), queue="b")  # and go on flowing
        assert later.get(timeout=DEADLINE) == 20
        assert [handle.status() for handle in stuck] == ["queued"] * 3
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
    assert not thread.is_alive()
    aside = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert aside and "queue 'a' set aside" in aside[0] and "fetch.lua" in aside[0]
    assert not any("queue 'b'" in line for line in aside)
    assert not any("retrying with backoff" in r.getMessage() for r in caplog.records)
    print(f"queue b's five tasks ran in {took:.2f} s")
