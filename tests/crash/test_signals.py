"""A burst of stop signals ends in one graceful stop, on every pool."""
from __future__ import annotations

import signal

import pytest

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.processes import exit_code, send

pytestmark = pytest.mark.crash


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_burst_of_sigterm_and_one_sigint_stops_the_worker_gracefully(
        kit: Kit, pool: str) -> None:
    worker = kit.worker("--pool", pool, "-c", "1")
    handle = kit.tasks.slow.delay("burst", 1.0)
    kit.wait_for_marks("started", "burst")

    for _ in range(20):
        send(worker, signal.SIGTERM)
    send(worker, signal.SIGINT)

    assert exit_code(worker) == 0
    assert handle.status() == "succeeded"
    kit.assert_nothing_left()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_task_raising_keyboard_interrupt_fails_alone_and_the_worker_goes_on(
        kit: Kit, pool: str) -> None:
    worker = kit.worker("--pool", pool, "-c", "1")
    failing = kit.tasks.interrupt.delay("own")
    behind = kit.tasks.record.delay("behind")

    assert behind.get(timeout=DEADLINE) == "behind"
    assert failing.status() == "failed"
    assert len(kit.marks("started", "own")) == 1  # once: no crash loop, no redelivery
    assert worker.poll() is None
    send(worker, signal.SIGTERM)
    assert exit_code(worker) == 0
    state = kit.queue_state()
    assert (state["leases"], state["ready"], state["dead"]) == (0, 0, 1), state
