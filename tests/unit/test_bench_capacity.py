"""The bench's capacity entries: what one core carries is 1e6 over the microseconds a
task costs it; an entry that cost nothing measured says so instead of dividing by 0."""
from __future__ import annotations

from minitask.bench.capacity import Capacity, Tally


def test_a_core_carries_a_million_over_the_microseconds_a_task_costs() -> None:
    capacity = Capacity()
    capacity.add("plain", redis_us=80.0, worker_us=250.0, how="a drain")
    (entry,) = capacity.entries
    assert entry["per_redis_core"] == 12_500 and entry["per_worker_core"] == 4_000
    lines = capacity.table()
    row = next(line for line in lines if line.strip().startswith("plain"))
    assert row.split()[1:5] == ["80.0", "250.0", "12,500", "4,000"]
    assert any(line.strip() == "a drain" for line in lines)


def test_a_cost_of_nothing_measured_carries_no_figure() -> None:
    capacity = Capacity()
    capacity.add("tiny", redis_us=5.0, worker_us=0.0, how="too short for /proc's ticks")
    assert capacity.entries[0]["per_worker_core"] is None
    assert capacity.table()[-2].split()[-1] == "-"


def test_a_tally_divides_the_cpu_of_every_window_by_all_their_tasks() -> None:
    tally = Tally(redis_seconds=0.003, worker_seconds=0.010, tasks=100)
    assert round(tally.redis_us, 6) == 30.0 and round(tally.worker_us, 6) == 100.0
    assert Tally().redis_us == 0.0  # no task yet: no division by zero
