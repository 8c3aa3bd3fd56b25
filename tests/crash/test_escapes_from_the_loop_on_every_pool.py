"""What a task's code raises out of the event loop from code it started (a child asyncio
task, a loop callback), and its ``loop.stop()``, fail that attempt on every pool (issue
29, probe 29b F3): on the asyncio pool, whose loop every attempt shares, they ended as
successes with an ERROR naming no task and a false "stopped by a task's code". The pool
runs on, every other task unaffected; a child that raises once its attempt has ended is
logged naming its task."""
from __future__ import annotations

import signal
import time
from pathlib import Path
import pytest

from minitask import Minitask, TaskFailed
from tests.support.pool_workers import pool_worker, producer_fixture
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 60.0
APP = "tests.apps.escaping"
FAILING = {"child_interrupt": "KeyboardInterrupt", "child_exit": "SystemExit",
           "callback_interrupt": "KeyboardInterrupt", "stops_loop": "RuntimeError"}


producer = producer_fixture(APP)


@pytest.mark.parametrize("pool", ["asyncio", "thread", "process"])
def test_what_escapes_the_loop_fails_the_attempt_whose_code_raised_it(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str,
        tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = pool_worker(processes, APP, server, pool, 4, log)
    failing = {name: producer.tasks[name].delay() for name in FAILING}
    left = producer.tasks["leaves_child"].delay()
    after = [producer.tasks["double"].delay(n) for n in range(10)]
    assert [handle.get(timeout=DEADLINE) for handle in after] == [2 * n for n in range(10)]
    for name, exc_type in FAILING.items():
        with pytest.raises(TaskFailed) as failed:  # succeeded on the asyncio pool
            failing[name].get(timeout=DEADLINE)
        assert failed.value.exc_type == exc_type, name
        assert failing[name].status() == "failed", name
    assert left.get(timeout=DEADLINE) == "parent returned"  # its child raised after it
    assert {d.task_id for d in producer.dead_letters()} == {h.id for h in failing.values()}
    assert producer.broker.queues.counts("default")["running"] == 0
    assert [handle.get(timeout=DEADLINE) for handle in [
        producer.tasks["double"].delay(n) for n in range(3)]] == [0, 2, 4]
    assert worker.poll() is None  # still serving
    if pool == "asyncio":  # the child left behind raised 0.3 s after its attempt ended
        until = time.monotonic() + DEADLINE
        while "code its attempt left behind" not in log.read_text():
            assert time.monotonic() < until, log.read_text()
            time.sleep(0.05)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    said = log.read_text()
    if pool == "asyncio":  # every line true: whose code, and nothing stopped the loop
        assert f"task 'leaves_child' (id {left.id}): code its attempt left behind" in said
        assert "KeyboardInterrupt: left behind" in said  # its traceback
        for name in ("child_interrupt", "child_exit", "callback_interrupt"):
            assert f"task {name!r} (id {failing[name].id}): code its attempt started" in said
        assert "was stopped" not in said
        assert "event loop raised; it runs again" not in said
