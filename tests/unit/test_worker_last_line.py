"""A worker's last log line says that it stopped and what stopped it, with its counts."""
from __future__ import annotations

import logging

import pytest

from minitask import Minitask


def test_a_burst_worker_says_it_stopped_with_nothing_left_to_do(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    @app.task
    def ok() -> None:
        pass

    ok.delay()
    with caplog.at_level(logging.INFO, logger="minitask"):
        app.worker(burst=True).run()
    last = [r for r in caplog.records if r.name.startswith("minitask")][-1].getMessage()
    assert "stopped (nothing left to do (burst)): 1 task(s) processed, 0 attempt(s) " \
           "failed" in last


def test_a_worker_stopped_from_code_says_so(app: Minitask,
                                            caplog: pytest.LogCaptureFixture) -> None:
    worker = app.worker(burst=False)

    @app.task
    def stop_it() -> None:
        worker.stop()

    stop_it.delay()
    with caplog.at_level(logging.INFO, logger="minitask"):
        worker.run()
    last = [r for r in caplog.records if r.name.startswith("minitask")][-1].getMessage()
    assert f"minitask worker {worker.name} stopped (" in last and "1 task(s) processed" in last
