"""A worker's orders list filled with orders no minitask wrote (50,000 planted entries)
costs one log line, not one each, is read a bounded batch at a time, and leaves
``minitask shutdown`` working."""
from __future__ import annotations

import re

import pytest

from minitask.cli import main
from tests.support.crash_kit import DEADLINE, Kit
from tests.support.processes import exit_code
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

PLANTED = 50_000


def test_planted_orders_are_said_in_one_line_and_shutdown_still_works(
        kit: Kit, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = kit.worker("--pool", "thread", "-c", "1")
    wait_until(lambda: kit.live_workers() == 1, timeout=DEADLINE, message="a live worker")
    [name] = [raw.decode() for raw in kit.client.zrange("minitask:{basic}:workers", 0, -1)]
    key = f"minitask:{{basic}}:control:{name}"
    pipe = kit.client.pipeline(transaction=False)
    for n in range(PLANTED):
        pipe.rpush(key, b"\xc1junk%d\x1b[2J" % n)
    pipe.execute()
    wait_until(lambda: kit.client.llen(key) == 0, timeout=DEADLINE,
               message="the planted orders read")
    # read in batches: far fewer reads than orders (one BLPOP each before)
    calls = {name: stats["calls"] for name, stats in kit.client.info("commandstats").items()}
    assert calls.get("cmdstat_blpop", 0) < PLANTED // 10, calls
    assert kit.tasks.record.delay("still-served").get(timeout=DEADLINE) == "still-served"

    monkeypatch.setenv("MINITASK_BROKER_URL", kit.server.url)
    assert main(["shutdown", "-A", "tests.apps.basic", name, "--wait", "30"]) == 0
    assert exit_code(worker) == 0
    log = (kit.logs / "worker-0.log").read_text(errors="replace")
    lines = [line for line in log.splitlines() if "unknown order" in line]
    assert 1 <= len(lines) <= 3, lines[:5]
    assert "\x1b" not in log and "Traceback" not in log
    # each line counts those it stands for: together, every planted order
    counted = sum(1 + int(re.search(r" and (\d+) more", line).group(1))  # type: ignore[union-attr]
                  if " more " in line else 1 for line in lines)
    assert counted == PLANTED, lines
