"""No duplicate while the worker lives (guarantees.rst), through a Redis blip shorter
than ``visibility_timeout``: a task that finished while Redis was away runs once,
and its outcome is recorded once Redis is back.

Why: a worker's heartbeat renews its leases every third of the visibility timeout,
and backs off while Redis is away (further still when an outcome waits: each flush
it tries fails too), so a lease can reach its deadline shortly after Redis is
back, before the heartbeat renews it or the finished task's outcome is written.
A fetch of the same worker's then took the lease back as expired and ran the task
a second time, in the same process (probe36 F1). A worker back from an outage now
renews the leases it holds before any of its fetches.

How: a real redis-server of the test's own, its every write in the AOF, killed
(SIGKILL) just before the heartbeat's next renewal, while a task runs in one thread
of the pool; the task ends during the outage; Redis is started again shortly before
the lease's deadline. Right after that deadline the pool's two other threads end
their tasks (failures, dead-lettered: no outcome of another's goes with theirs) and
fetch, and tasks sent then wake the worker's dispatcher. Each round lines the
outage up with the lease it reads from Redis; whether the heartbeat's or the
recording thread's backoff ends before the deadline is chance, so the rounds are
repeated (they stop at the first duplicate: before the fix, most runs met one
within a few rounds, on either pool). The process pool is left out: each child
renews only its own leases first, and another child's fetch can still take one
(guarantees.rst says so)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, List

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from tests.apps.blips import build
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

#: The worker's visibility timeout (s): its heartbeat renews every third of it.
VISIBILITY = 1.5
PERIOD = VISIBILITY / 3
#: Rounds of blips at most (each some 3 s).
ROUNDS = 8
#: Redis is started again this long before the lease's deadline (s): the outage lasts
#: about VISIBILITY - 0.9 * PERIOD - this, well under the visibility timeout.
BACK_BEFORE = 0.25
#: Tasks sent after the deadline, each waking the worker's fetch, and their spacing (s).
WAKES, WAKE_EVERY = 40, 0.02
DEADLINE = 60.0
LEASES = QueueKeys("blips", "default").leases


@pytest.mark.parametrize("pool", ["thread", "asyncio"])
def test_a_task_finished_during_a_short_blip_runs_once(
        start_redis: Callable[..., RedisServer], processes: Processes,
        tmp_path: Path, pool: str) -> None:
    server = start_redis("--appendonly", "yes", "--appendfsync", "always")
    runs = tmp_path / "runs"
    runs.mkdir()
    log = tmp_path / "worker.log"
    worker = processes.worker(
        "tests.apps.blips", "--pool", pool, "-c", "3", log=log,
        env={"MINITASK_BROKER_URL": server.url, "TEST_VISIBILITY": str(VISIBILITY),
             "BLIP_RUNS": str(runs)})
    app = build(server.url)
    client = server.client()
    try:
        assert app.tasks["tick"].delay(0).get(timeout=DEADLINE) == 0  # the worker serves
        for round_ in range(ROUNDS):
            key = f"r{round_}"
            handle = app.tasks["nap"].delay(key)
            wait_until(lambda: (runs / f"runs-{key}").exists(), timeout=DEADLINE,
                       message=f"task {key} to start")
            stumbles = [app.tasks["stumble"].delay(key) for _ in range(2)]  # the other slots
            wait_until(lambda: client.zcard(LEASES) == 3, timeout=DEADLINE,
                       message="the stumbling tasks to start")
            deadline_s = _renewed_deadline(client, handle.id)
            # just before the heartbeat's next renewal: the lease has the least left
            _sleep_until(deadline_s - VISIBILITY + 0.9 * PERIOD)
            server.stop()  # SIGKILL: the AOF (always) keeps every write
            (runs / f"go-{key}").touch()  # the task ends while Redis is away
            _sleep_until(deadline_s - BACK_BEFORE)
            server.start()  # same port and directory
            _sleep_until(deadline_s + 0.03)
            (runs / f"fail-{key}").touch()  # their slots fetch next
            _wake(app, round_)
            assert handle.get(timeout=DEADLINE) == key
            for stumbled in stumbles:
                wait_until(lambda: stumbled.status() == "failed", timeout=DEADLINE,
                           message="the stumbling tasks to be dead-lettered")
            wait_until(lambda: client.zcard(LEASES) == 0, timeout=DEADLINE,
                       message="every lease to be given up")
            ran: List[str] = (runs / f"runs-{key}").read_text().splitlines()
            assert len(ran) == 1, (
                f"round {round_}: task {key}, which finished during a Redis blip of about "
                f"{VISIBILITY - 0.9 * PERIOD - BACK_BEFORE:.2f} s (visibility_timeout "
                f"{VISIBILITY} s), ran {len(ran)} times (delivery, pid): {ran}")
        assert worker.poll() is None, "the worker still serves"
    except BaseException:
        if log.exists():
            print("\n".join(log.read_text(errors="replace").splitlines()[-60:]))
        raise
    finally:
        client.close()
        app.close()


def _renewed_deadline(client: "redis.Redis[bytes]", task_id: str) -> float:
    """The lease deadline of ``task_id`` (s, the epoch: Redis's clock is this host's),
    read just after the heartbeat renewed it."""
    def deadline() -> float:
        score = client.zscore(LEASES, task_id)
        assert score is not None, f"task {task_id} is not leased"
        return int(score) // 10 / 1000

    first = deadline()
    return float(wait_until(lambda: (lambda now: now if now != first else None)(deadline()),
                            timeout=DEADLINE, interval=0.005,
                            message="the heartbeat to renew the lease"))


def _sleep_until(epoch_s: float) -> None:
    time.sleep(max(0.0, epoch_s - time.time()))


def _wake(app: Minitask, round_: int) -> None:
    """Send tasks one after another, each waking the worker's wait, which fetches."""
    tick = app.tasks["tick"]
    handles = []
    for n in range(WAKES):
        try:
            handles.append(tick.delay(round_ * 1000 + n))
        except BrokerError:  # the producer's connection was Redis's before the blip
            pass
        time.sleep(WAKE_EVERY)
    for handle in handles:
        handle.get(timeout=DEADLINE)
