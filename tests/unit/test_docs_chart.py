"""The performance page's charts and table are what docs/performance/chart.py makes of the data."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "docs" / "performance"


def test_the_committed_charts_are_drawn_from_the_committed_bench_output() -> None:
    spec = importlib.util.spec_from_file_location("docs_chart", FOLDER / "chart.py")
    assert spec is not None and spec.loader is not None
    chart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chart)
    made = chart.charts(chart.load(), chart.load(FOLDER / "capacity.json"))
    assert set(made) == {"throughput.svg", "latency.svg", "rows.inc", "capacity.inc"}
    for name, text in made.items():
        assert (FOLDER / name).read_text() == text, "run python docs/performance/chart.py"
