"""An app for the test of a task that finishes while Redis is away for a moment
(tests/crash/test_no_second_run_after_a_short_blip.py). The broker comes from
MINITASK_BROKER_URL, the lease length from TEST_VISIBILITY; the tasks touch no
Redis of their own: what ran is written to files under BLIP_RUNS, which stay
readable while Redis is down."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from minitask import Minitask, current_task

#: Longest ``nap`` waits for the test's go-ahead (s): a test that died leaves none.
GO_MOST = 60.0


def build(broker: Any = None) -> Minitask:
    """The app, on ``broker`` (None: MINITASK_BROKER_URL): the test builds it too."""
    app = Minitask("blips", broker=broker,
                   visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))

    @app.task(name="nap")
    def nap(key: str) -> str:
        """Note each run of ``key`` (its delivery and pid) in ``runs-<key>``, then end as
        soon as the test lays down ``go-<key>``."""
        runs = Path(os.environ["BLIP_RUNS"])
        context = current_task()
        with open(runs / f"runs-{key}", "a") as noted:
            noted.write(f"{context.delivery if context else 0} {os.getpid()}\n")
        _wait_for(runs / f"go-{key}")
        return key

    @app.task(name="stumble")
    def stumble(key: str) -> None:
        """Fail (dead-lettered: no retries) as soon as the test lays down ``fail-<key>``:
        its thread then fetches its next task, no outcome of another's written with it."""
        _wait_for(Path(os.environ["BLIP_RUNS"]) / f"fail-{key}")
        raise RuntimeError(f"stumbled ({key}), on purpose")

    @app.task(name="tick")
    def tick(n: int) -> int:
        """A task that does nothing: each one sent wakes the worker, which fetches."""
        return n

    return app


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + GO_MOST
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.005)


app = build()
