"""``minitask bench``'s latency rows: how soon an idle worker starts a task sent with
``delay()`` (beside a bare BLPOP wake-up in another process), and how close to
their eta ``apply_in()`` tasks start."""
from __future__ import annotations

import subprocess
import sys
import time
from typing import List, Optional

import redis

from ..errors import BrokerError
from .interrupts import starting
from .report import Row, percentile, progress
from .scratch import WAKE, WAKE_REPLY
from .session import Session
from .tasks import lateness, started_at


def echo_wake_ups(url: str, samples: int) -> None:
    """The bare wake-up baseline's own process: for each token popped, echo back the
    ms since the producer pushed it."""
    client = redis.Redis.from_url(url)
    client.rpush(WAKE_REPLY, "listening")
    for _ in range(samples):
        popped = client.blpop([WAKE], timeout=30)
        if popped is None:
            return
        client.rpush(WAKE_REPLY, (time.time() - float(popped[1])) * 1000.0)


class LatencyRows:
    """Milliseconds from a call to the start of its task, on an idle worker."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def bare_wake_up(self, samples: int) -> List[float]:
        """ms from an LPUSH to a BLPOP returning in another process: the floor under
        a worker's pickup latency on this machine, measured the same way."""
        client = self.session.client
        echo: "Optional[subprocess.Popen[bytes]]" = None
        try:
            with starting():
                echo = subprocess.Popen(
                    [sys.executable, "-c", f"from minitask.bench.latency import "
                                           f"echo_wake_ups; echo_wake_ups("
                                           f"{self.session.url!r}, {samples})"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True)
            if client.blpop([WAKE_REPLY], timeout=30) is None:  # it is listening
                raise BrokerError("the bare wake-up baseline's process did not start")
            found = []
            for _ in range(samples):
                time.sleep(0.002)  # as the pickup samples do
                client.lpush(WAKE, repr(time.time()))
                reply = client.blpop([WAKE_REPLY], timeout=10)
                if reply is None:
                    raise BrokerError("the bare wake-up baseline's process stopped answering")
                found.append(float(reply[1]))
            return found
        finally:
            if echo is not None:
                echo.kill()
                echo.wait(timeout=10)

    def latency(self, samples: int = 200) -> None:
        progress(f"latency: idle worker, delay() -> start, {samples} samples")
        session, report = self.session, self.session.report
        bare = self.bare_wake_up(samples)
        bare_p50 = percentile(bare, 0.5)
        report.latency_baselines["BLPOP wake-up in another process, p50"] = bare_p50
        report.latency_baselines["BLPOP wake-up in another process, p99"] = (
            percentile(bare, 0.99))
        task = session.app().tasks[started_at.name]
        session.workers.start("--pool", "process", "-c", "1")
        session.workers.wait_registered(session.client, 1)
        delays = []
        for _ in range(samples):
            delays.append(task.delay(time.time()).get(timeout=10) * 1000.0)
            time.sleep(0.002)  # the worker is idle again before the next one
        session.cleanup()
        p50, p99 = percentile(delays, 0.5), percentile(delays, 0.99)
        report.add(Row("idle pickup latency p50", p50, "ms", "<= 0.5 ms", p50 <= 0.5,
                       f"{p50 / bare_p50:.2f} x a bare BLPOP wake-up"))
        report.add(Row("idle pickup latency p99", p99, "ms", "<= 2 ms", p99 <= 2.0))

    def delayed(self, samples: int = 200) -> None:
        progress(f"delayed: {samples} apply_in() tasks due 1-3 s ahead")
        session, report = self.session, self.session.report
        task = session.app().tasks[lateness.name]
        session.workers.start("--pool", "process", "-c", "1")
        session.workers.wait_registered(session.client, 1)
        handles = [task.apply_in(1.0 + 2.0 * index / samples) for index in range(samples)]
        late = [handle.get(timeout=30) * 1000.0 for handle in handles]
        session.cleanup()
        p50, p99, early = percentile(late, 0.5), percentile(late, 0.99), min(late)
        report.add(Row("apply_in() lateness p50", p50, "ms", "<= 2 ms", p50 <= 2.0))
        report.add(Row("apply_in() lateness p99", p99, "ms", "<= 5 ms", p99 <= 5.0))
        report.add(Row("apply_in() earliest start vs eta", early, "ms", ">= 0 (never early)",
                       early >= 0.0))
