"""The bench's durability rows run end to end and stop what they started (no timing
asserted)."""
from __future__ import annotations

import pytest

from minitask.bench.durable import measure_durability

pytestmark = pytest.mark.integration


@pytest.mark.timeout(300)
def test_durability_bench_measures_replicated_writes_beside_plain_ones() -> None:
    rows = measure_durability()
    assert [row["metric"] for row in rows] == [
        "delay() one at a time, durability='replicated'",
        "drain -c1, durable outcomes ('replicated')"]
    assert all(row["value"] > 0 for row in rows)
    assert "durability=None in the same run" in rows[0]["detail"]
