"""A task that leaves a repeating ``SIGALRM`` timer armed in a process pool child
(issue 29, probe31 L3: 7 of 15 later tasks of that child dead-lettered with its
handler's error) fails no later task: the child stops the timer as the attempt
returns, puts back the ``SIGALRM`` handler it started with, and says once, at
WARNING, which task left it; a handler left with no timer armed harms nothing.
Real worker processes of tests/apps/left_alarm.py (a process pool of one child, so
every task runs where the alarm was left) on the suite's redis-server; then
``AlarmGuard`` itself, as the child's ``on_end`` uses it, in this process's main thread."""
from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import FrameType
from typing import Any, Iterator, List, Optional

import pytest

from minitask import Minitask
from minitask.worker import softlimit
from minitask.worker.softlimit import AlarmGuard
from tests.support.alarms import sigalrm_restored
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DEADLINE = 60.0


def test_an_alarm_a_task_left_armed_fails_no_later_task(
        redis_server: RedisServer, processes: Processes, tmp_path: Path) -> None:
    import tests.apps.left_alarm as left
    app = Minitask("left_alarm", broker=redis_server.url)
    for name, task in left.app.tasks.items():
        app.task(name=name, retries=0)(task.func)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.left_alarm", "--pool", "process", "-c", "1",
                              env={"MINITASK_BROKER_URL": redis_server.url}, log=log)
    try:
        outcomes: List[Any] = []
        for _ in range(2):  # twice: said once
            assert app.tasks["leaves_alarm"].delay().get(timeout=DEADLINE) == "armed"
            outcomes += [app.tasks["naps"].delay(i).get(timeout=DEADLINE) for i in range(4)]
        assert app.tasks["leaves_handler"].delay().get(timeout=DEADLINE) == "set"
        outcomes += [app.tasks["naps"].delay(i).get(timeout=DEADLINE) for i in range(4)]
        assert outcomes == [0, 1, 2, 3] * 3
    finally:
        app.close()
        stop_worker(worker, log)
    text = log.read_text(errors="replace")
    said = [line for line in text.splitlines() if "left an alarm armed" in line]
    assert len(said) == 1, said
    assert "WARNING" in said[0] and "'leaves_alarm'" in said[0], said[0]
    assert "rang" not in text and "ERROR" not in text, text[-3000:]


@pytest.fixture
def alarm_kept() -> Iterator[None]:
    with sigalrm_restored():
        try:
            yield
        finally:
            softlimit._SAID_LEFT.clear()


def test_the_guard_stops_the_timer_and_puts_the_handler_back(
        alarm_kept: None, caplog: pytest.LogCaptureFixture) -> None:
    heard: List[str] = []
    guard = AlarmGuard()
    mine = signal.getsignal(signal.SIGALRM)

    def start() -> None:  # the child's on_start
        guard.task = "jobs.leaky"
        heard.append("start")

    def end() -> None:  # the child's on_end (pools/processes.py)
        if signal.setitimer(signal.ITIMER_REAL, 0)[0]:
            guard.left()
        heard.append("end")

    def leaked(signum: int, frame: Optional[FrameType]) -> None:
        raise RuntimeError("rang")

    caplog.set_level(logging.DEBUG, "minitask.worker.softlimit")
    for _ in range(2):
        start()
        signal.signal(signal.SIGALRM, leaked)
        signal.setitimer(signal.ITIMER_REAL, 30.0, 30.0)
        end()
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        assert signal.getsignal(signal.SIGALRM) is mine
    start()
    signal.signal(signal.SIGALRM, leaked)  # a handler alone: nothing rings it, not said
    end()
    assert heard == ["start", "end"] * 3
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "'jobs.leaky' left an alarm armed" in warned[0].getMessage()


def test_a_ring_before_the_timer_stopped_raises_nowhere(
        alarm_kept: None, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A ring that came just before the timer stopped runs the task's handler at the
    latest in ``signal.signal`` (which runs pending handlers first): its error is
    no one's, the handler is put back all the same, and the task is said to have
    left an alarm."""
    mine = signal.getsignal(signal.SIGALRM)
    rang: List[int] = []

    def leaked(signum: int, frame: Optional[FrameType]) -> None:
        raise RuntimeError("rang")

    class Signals:
        """``signal``, whose ``signal`` runs the task's handler for a pending ring once."""

        def __getattr__(self, name: str) -> Any:
            return getattr(signal, name)

        @staticmethod
        def signal(signum: int, handler: Any) -> Any:
            if not rang:
                rang.append(signum)
                leaked(signum, None)
            return signal.signal(signum, handler)

    signal.signal(signal.SIGALRM, leaked)
    monkeypatch.setattr(softlimit, "signal", Signals())
    softlimit.left_alarm("jobs.rung", mine)
    monkeypatch.undo()
    assert rang and signal.getsignal(signal.SIGALRM) is mine
    assert "'jobs.rung' left an alarm armed" in caplog.text
