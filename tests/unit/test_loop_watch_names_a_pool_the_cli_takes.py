"""The asyncio loop watch's advice names a ``--pool`` value ``minitask worker`` takes
(probe 9, L1: it said ``--pool threads``, which the command line refuses)."""
from __future__ import annotations

import asyncio
import logging
import re

import pytest

from minitask.cli.main import _parser
from minitask.worker.pools.watchdog import LoopWatch

WATCH = "minitask.worker.pools.watchdog"


def test_the_pool_the_warning_recommends_is_one_the_worker_command_accepts(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    holding = object()
    # the watch's own thread never wakes here: its period is an hour
    watch = LoopWatch(loop, lambda: ["shop.slow"],
                      lambda task: ("shop.slow", "id1") if task is holding else None,
                      blocked_after=3600.0)
    monkeypatch.setattr(asyncio, "current_task", lambda loop=None: holding)
    try:
        with caplog.at_level(logging.WARNING, logger=WATCH):
            watch._blocked()
    finally:
        watch.stop()
        loop.close()
    (warning,) = [r.getMessage() for r in caplog.records if r.name == WATCH]
    (value,) = re.findall(r"--pool (\S+)", warning)
    parser, _ = _parser()
    args = parser.parse_args(["worker", "-A", "shop", "--pool", value])  # exits 2 if refused
    assert args.pool == value == "thread"
