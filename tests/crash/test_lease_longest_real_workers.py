"""Workers of different visibility timeouts on one queue, as real processes on a real
redis-server: a short-lease worker fetching beside a long-lease one never takes the
long one's live task (whatever its lease, an hour or more ahead of the short one's
bound too: the queue's ``lease_longest``, which each worker says before it fetches);
killed with SIGKILL, the long one's task comes back once its lease has run out, not
before, and runs to its end; and a worker started while ``lease_longest`` holds data
minitask did not write serves its queue all the same.

Times are compared on Redis's clock only: the lease end is what the killed worker
wrote in the queue's leases, the re-delivery's start what ``tests.apps.stamped``'s
task read from Redis's ``TIME``.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
import redis

from tests.apps.stamped import parse_stamp, stamped
from tests.support.crash_kit import DEADLINE, QUEUE, Kit
from tests.support.processes import kill_group
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

APP = "tests.apps.stamped"
#: The short-lease worker's visibility timeout (s).
SHORT_S = 2.0
#: The killed worker's visibility timeout (s): longer than the short one's, short enough
#: for its lease to run out within the test.
KILLED_S = 6.0
#: How long the long worker's task runs while the short one serves beside it (s).
HELD_S = 8.0
#: How much earlier than the lease end a re-delivery may start (ms): the two workers'
#: readings of Redis's clock, each corrected by its own measure of the offset.
TOLERANCE_MS = 250


def stamped_on(kit: Kit) -> Any:
    """``stamped(key, seconds, again)``, sent from the test's side."""
    return kit.tasks.app.task(name=stamped.name)(stamped.func)


def redis_ms(client: "redis.Redis") -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def stamps(kit: Kit, key: str) -> List[Tuple[int, int, int]]:
    return [parse_stamp(raw) for raw in kit.client.lrange(f"stamps:{key}", 0, -1)]


def wait_for_stamps(kit: Kit, key: str, count: int) -> List[Tuple[int, int, int]]:
    found: List[Tuple[int, int, int]] = wait_until(
        lambda: (lambda s: s if len(s) >= count else None)(stamps(kit, key)),
        timeout=DEADLINE, message=f"{count} start(s) of {key!r}")
    return found


def lease_end_ms(kit: Kit, task_id: str) -> Optional[int]:
    """The task's lease deadline as its worker wrote it (score: deadline * 10 + band)."""
    score = kit.client.zscore(QUEUE.leases, task_id)
    return None if score is None else int(score) // 10


def deliveries(kit: Kit, task_id: str) -> int:
    return int(kit.client.hget(QUEUE.deliveries, task_id) or 0)


def serve_beside(kit: Kit, until: Callable[[], bool], watch: Callable[[], None],
                 prefix: str) -> List[str]:
    """Quick tasks one after the other (one at a time, at most ten a second) until
    ``until()``, which is asked every 10 ms: the short worker runs them (the long one's
    one slot is busy), and after each it fetches with nothing ready, the fetch that
    looks for leases dated far ahead. ``watch()`` after each one ended. The keys of the
    tasks sent (the last one may not have run yet)."""
    keys: List[str] = []
    deadline = time.monotonic() + DEADLINE
    pending: Any = None
    sent = 0.0
    while not until():
        assert time.monotonic() < deadline, f"waited too long; quick tasks sent: {keys}"
        if pending is not None and pending.status() == "succeeded":
            watch()
            pending = None
        if pending is None and time.monotonic() - sent >= 0.1:
            keys.append(f"{prefix}-{len(keys)}")
            pending, sent = kit.tasks.record.delay(keys[-1]), time.monotonic()
        time.sleep(0.01)
    return keys


@pytest.mark.parametrize("long_s", [60.0, 7200.0], ids=["a-minute", "two-hours"])
def test_a_short_lease_worker_never_takes_a_long_lease_workers_live_task(
        kit: Kit, long_s: float) -> None:
    """Two hours is past the hour a fetch allows any lease (a clock ahead): only the
    ``lease_longest`` the long worker said keeps its lease its own."""
    task = stamped_on(kit)
    long = kit.worker("--pool", "thread", "-c", "1", "--name", "long", app=APP,
                      visibility=long_s)
    handle = task.delay("held", HELD_S, 0.0)
    assert wait_for_stamps(kit, "held", 1)[0][:2] == (long.pid, 1)
    first_end = lease_end_ms(kit, handle.id)
    assert first_end is not None
    short = kit.worker("--pool", "thread", "-c", "1", "--name", "short", app=APP,
                       visibility=SHORT_S)

    ends = [first_end]

    def watch() -> None:
        assert len(stamps(kit, "held")) == 1, "started again while its worker held it"
        assert deliveries(kit, handle.id) in (0, 1)  # (0: ended, its count gone)
        end = lease_end_ms(kit, handle.id)
        if end is not None:
            ends.append(end)

    quick = serve_beside(kit, lambda: bool(kit.marks("done", "held")), watch, "quick")
    assert handle.get(timeout=DEADLINE) == "held"
    kit.wait_until_drained()

    ran = kit.marks_of("done", quick)
    pids = [mark.pid for key in quick for mark in ran[key]]
    assert len(pids) == len(quick) and short.pid in pids, (
        f"the short worker served beside the long one: {pids}")
    assert [stamp[:2] for stamp in stamps(kit, "held")] == [(long.pid, 1)], (
        "the held task started more than once")
    marks = kit.marks("started", "held") + kit.marks("done", "held")
    assert [(mark.pid, mark.delivery) for mark in marks] == [(long.pid, 1)] * 2, (
        "the held task ran more than once")
    assert max(ends) > first_end, (
        f"the long worker renewed its lease while it ran: {first_end} -> {max(ends)}")
    assert kit.client.zscore(QUEUE.lease_longest, "ms") == long_s * 1000, (
        "the longest said is kept: the short worker's said nothing shorter over it")
    assert long.poll() is None and short.poll() is None
    kit.assert_nothing_left()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_killed_long_lease_workers_task_comes_back_when_its_lease_ends_not_before(
        kit: Kit, pool: str) -> None:
    task = stamped_on(kit)
    long = kit.worker("--pool", pool, "-c", "1", "--name", "long", app=APP,
                      visibility=KILLED_S)
    handle = task.delay("held", 10 * DEADLINE, 0.5)  # a first run that would not end
    (first,) = wait_for_stamps(kit, "held", 1)
    first_end = lease_end_ms(kit, handle.id)
    assert first_end is not None
    short = kit.worker("--pool", "thread", "-c", "1", "--name", "short", app=APP,
                       visibility=SHORT_S)

    def watch() -> None:
        assert len(stamps(kit, "held")) == 1, "started again while its worker held it"
        assert deliveries(kit, handle.id) == 1

    # served beside it until its first lease is a second past: only renewals hold it
    quick = serve_beside(kit, lambda: redis_ms(kit.client) > first_end + 1000, watch,
                         "before")
    kill_group(long)
    time.sleep(0.2)  # (a renewal sent as it died, read by Redis after it)
    end = lease_end_ms(kit, handle.id)
    assert end is not None and end > first_end, "renewed while its worker lived"
    assert len(stamps(kit, "held")) == 1 and not kit.marks("done", "held")

    # the first time Redis says it was handed over again (its count, read in one step
    # with Redis's time: that time is past the hand-over)
    seen: Dict[str, int] = {}

    def handed_over() -> bool:
        pipe = kit.client.pipeline(transaction=True)
        pipe.time()
        pipe.hget(QUEUE.deliveries, handle.id)
        (seconds, micros), count = pipe.execute()
        if int(count or 0) < 2 and not kit.marks("done", "held"):
            return False
        seen["at"] = int(seconds) * 1000 + int(micros) // 1000
        return True

    # served beside it until then: the short worker fetches right up to its lease end
    after = serve_beside(kit, handed_over, lambda: None, "after")
    assert seen["at"] >= end - TOLERANCE_MS, (
        f"handed over {end - seen['at']} ms before the lease end {end}")
    second = wait_for_stamps(kit, "held", 2)[1]
    assert second[:2] == (short.pid, 2), f"the short worker ran it again: {second}"
    assert second[2] >= end - TOLERANCE_MS, (
        f"started again {end - second[2]} ms before the lease end {end}")
    assert handle.get(timeout=DEADLINE) == "held"
    kit.wait_until_drained()

    assert stamps(kit, "held") == [first, second]
    started, done = kit.marks("started", "held"), kit.marks("done", "held")
    assert [(mark.pid, mark.delivery) for mark in started] == [(first[0], 1), (short.pid, 2)]
    assert [(mark.pid, mark.delivery) for mark in done] == [(short.pid, 2)], done
    assert all(len(marks) == 1 for marks in kit.marks_of("done", quick + after).values())
    assert short.poll() is None
    kit.assert_nothing_left()


#: Members minitask never writes ("ms" alone), one of them no text.
FOREIGN_MEMBERS: Dict[Any, float] = {b"\xff\xfejunk": 9e15, "longest": 5}
PLANTS: Dict[str, Callable[["redis.Redis", str], Any]] = {
    "string": lambda client, key: client.set(key, "junk"),
    "infinite": lambda client, key: client.zadd(key, {"ms": float("inf")}),
    "huge": lambda client, key: client.zadd(key, {"ms": 1e300}),
    "negative": lambda client, key: client.zadd(key, {"ms": -1e18}),
    "foreign-member": lambda client, key: client.zadd(key, FOREIGN_MEMBERS),
}


@pytest.mark.parametrize("planted", sorted(PLANTS))
def test_a_worker_serves_its_queue_whatever_lease_longest_holds(
        kit: Kit, planted: str) -> None:
    key = QUEUE.lease_longest
    PLANTS[planted](kit.client, key)
    worker = kit.worker("--pool", "thread", "-c", "2")
    handles = [kit.tasks.record.delay(f"served-{index}") for index in range(4)]
    longer = kit.tasks.slow.delay("longer", 2 * SHORT_S)  # past its lease: renewed
    assert [h.get(timeout=DEADLINE) for h in handles] == [f"served-{i}" for i in range(4)]
    assert longer.get(timeout=DEADLINE) == "longer"
    kit.wait_until_drained()
    assert len(kit.marks("started", "longer")) == 1, "ran once while its worker held it"
    assert worker.poll() is None, "the worker lives on"
    logs = "".join(path.read_text(errors="replace") for path in kit.logs.glob("worker-*.log"))
    assert "Traceback" not in logs and "lost Redis" not in logs, logs[-3000:]

    if planted == "string":
        assert kit.client.get(key) == b"junk", "left as it is"
    else:
        # a score no worker can say (inf, 1e300) taken out, then ZADD GT: the worker's
        assert kit.client.zscore(key, "ms") == SHORT_S * 1000
    kit.assert_nothing_left()
