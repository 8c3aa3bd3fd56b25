"""``minitask bench`` runs end to end on a small N and prints every row; no timing is
asserted (speed is the benchmark's business, never the tests')."""
from __future__ import annotations

import pytest
import redis

from minitask.cli import main
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

ROWS = (
    "delay() one call at a time",
    "delay_many() in batches of 1,000",
    "drain, --pool process -c 1 --prefetch 1",
    "drain, --pool process -c 1 --prefetch 1, recent_outcomes=0",
    "drain, --pool process -c 2 --prefetch 1",
    "drain, --pool process -c 1 --prefetch 100",
    "drain, --pool process -c 2 --prefetch 100",
    "idle pickup latency p50",
    "idle pickup latency p99",
    "apply_in() lateness p50",
    "apply_in() lateness p99",
    "apply_in() earliest start vs eta",
    "Redis memory per queued task, above message",
    "worker RSS growth while draining a 1M queue",
    "dashboard queue page",
    "dashboard /metrics",
    "idle dashboard, one open tab: Redis commands/min",
    "idle dashboard, one open tab: Redis CPU/min",
)

#: The capacity table's cases: CPU per task, Redis's and the worker's.
CAPACITY = (
    "ignore_result, process pool -c 1, prefetch 1",
    "ignore_result, process pool -c 2, prefetch 1",
    "ignore_result, process pool -c 1, prefetch 100",
    "ignore_result, process pool -c 2, prefetch 100",
    "result kept, process pool -c 1, prefetch 1",
    "a chord member (its result joined), process pool -c 2",
    "a broadcast call, per subscriber",
    "durability='replicated' outcomes, process pool -c 1, prefetch 1",
    "the same with durability=None, process pool -c 1, prefetch 1",
    "flow control (rate_limit + max_running), thread pool -c 4",
    "the same without limits, thread pool -c 4",
)


# about 4 minutes on a quiet 2-core machine; over 10 in a parallel run (make test) on a
# machine other test runs load too, which 600 s failed
@pytest.mark.timeout(1200)
def test_bench_prints_every_row_and_the_scaling_tables_and_leaves_no_keys(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--broker", redis_server.url, "--tasks", "300",
                 "--memory-tasks", "2000", "--scaling", "--loglevel", "WARNING"])

    out = capsys.readouterr().out
    assert code == 0
    for row in ROWS:
        assert row in out, f"no row {row!r} in:\n{out}"
    assert "CPU us/task: worker children" in out
    assert "us of Redis CPU per task (" in out  # what the record of recent outcomes costs
    capacity = out[out.index("capacity: CPU per task"):].splitlines()
    for case in CAPACITY:
        line = next((line for line in capacity if line.strip().startswith(case)), None)
        assert line is not None, f"no capacity line {case!r} in:\n{out}"
        redis_us, worker_us, per_redis_core = line.strip()[len(case):].split()[:3]
        # the server did work; the workers' /proc times count 10 ms ticks, which a
        # run of 300 tasks may not reach
        assert float(redis_us.replace(",", "")) > 0 and float(worker_us.replace(",", "")) >= 0
        assert int(per_redis_core.replace(",", "")) > 0
    assert "single command loop (SET)" in out and "two round trips per item" in out
    scaling = out[out.index("scaling (prefetch 1):"):]
    for processes in (1, 2, 4, 8):
        assert any(line.split()[:2] == [str(processes), "0"] for line in scaling.splitlines())
    for pending in ("10", "100", "10000"):
        assert any(line.split()[:2] == ["1", pending] for line in scaling.splitlines())
    for length in ("200", "1,000", "2,000"):
        assert any(line.split()[:1] == [length] for line in scaling.splitlines())
    assert not list(admin.scan_iter(match="minitask:{minitask-bench*"))
