"""Draw the performance page's charts and tables from ``minitask bench --json`` output.

The data, ``bench.json`` beside this file, was made with::

    minitask bench --start-server --json --tasks 5000 --memory-tasks 20000 > bench.json

``capacity.json``, the run the capacity table comes from, with the same command
(``> capacity.json``), and the charts with ``python docs/performance/chart.py``
(no dependency: the SVG is written by hand). tests/unit/test_docs_chart.py checks that the committed
charts are what this script makes of the committed data.
"""
from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent

Bar = Tuple[str, float, str]  # label, value, kind ("minitask" or "baseline")

COLOURS = {"minitask": "#2b6cb0", "baseline": "#a0aec0"}
#: what an empty cell of the table shows (a bare "-" would start a list)
EMPTY = "\u2014"
WIDTH, LABEL_WIDTH, BAR_HEIGHT, GAP, TOP = 760, 330, 22, 8, 48


def load(path: Path = HERE / "bench.json") -> Dict[str, object]:
    return json.loads(path.read_text())


def _rows(data: Dict[str, object]) -> Dict[str, float]:
    return {row["metric"]: row["value"] for row in data["rows"]}  # type: ignore[index,union-attr]


def throughput_bars(data: Dict[str, object]) -> List[Bar]:
    rows, base = _rows(data), data["baselines"]
    return [
        ("bare redis-py SET loop", base["single command loop (SET)"], "baseline"),  # type: ignore
        ("delay(), one call at a time", rows["delay() one call at a time"], "minitask"),
        ("bare two-round-trip loop (LMOVE + LREM)",
         base["two round trips per item (LMOVE + LREM)"], "baseline"),  # type: ignore
        ("drain -c 1, prefetch 1", rows["drain, --pool process -c 1 --prefetch 1"], "minitask"),
        ("drain -c 2, prefetch 1", rows["drain, --pool process -c 2 --prefetch 1"], "minitask"),
        ("drain -c 1, prefetch 100", rows["drain, --pool process -c 1 --prefetch 100"],
         "minitask"),
        ("drain -c 2, prefetch 100", rows["drain, --pool process -c 2 --prefetch 100"],
         "minitask"),
    ]


def latency_bars(data: Dict[str, object]) -> List[Bar]:
    rows, base = _rows(data), data["latency_baselines_ms"]
    wake = "BLPOP wake-up in another process, "
    return [
        ("bare BLPOP wake-up, p50", base[wake + "p50"], "baseline"),  # type: ignore
        ("idle worker: delay() to start, p50", rows["idle pickup latency p50"], "minitask"),
        ("apply_in(): lateness, p50", rows["apply_in() lateness p50"], "minitask"),
        ("bare BLPOP wake-up, p99", base[wake + "p99"], "baseline"),  # type: ignore
        ("idle worker: delay() to start, p99", rows["idle pickup latency p99"], "minitask"),
        ("apply_in(): lateness, p99", rows["apply_in() lateness p99"], "minitask"),
    ]


def svg(title: str, unit: str, bars: List[Bar], digits: int) -> str:
    """A horizontal bar chart: one bar per row, its value written at its end."""
    height = TOP + len(bars) * (BAR_HEIGHT + GAP) + 30
    longest = max(value for _, value, _ in bars)
    room = WIDTH - LABEL_WIDTH - 90
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="13">',
           f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
           f'<text x="10" y="24" font-size="15" font-weight="bold">{escape(title)}</text>']
    for index, (label, value, kind) in enumerate(bars):
        y = TOP + index * (BAR_HEIGHT + GAP)
        length = max(1.0, room * value / longest)
        out.append(f'<text x="{LABEL_WIDTH - 8}" y="{y + 16}" text-anchor="end">'
                   f'{escape(label)}</text>')
        out.append(f'<rect x="{LABEL_WIDTH}" y="{y}" width="{length:.1f}" height="{BAR_HEIGHT}" '
                   f'fill="{COLOURS[kind]}"/>')
        out.append(f'<text x="{LABEL_WIDTH + length + 6:.1f}" y="{y + 16}">'
                   f'{value:,.{digits}f} {escape(unit)}</text>')
    legend_y = height - 12
    out.append(f'<rect x="{LABEL_WIDTH}" y="{legend_y - 10}" width="12" height="12" '
               f'fill="{COLOURS["minitask"]}"/>')
    out.append(f'<text x="{LABEL_WIDTH + 18}" y="{legend_y}">minitask</text>')
    out.append(f'<rect x="{LABEL_WIDTH + 100}" y="{legend_y - 10}" width="12" height="12" '
               f'fill="{COLOURS["baseline"]}"/>')
    out.append(f'<text x="{LABEL_WIDTH + 118}" y="{legend_y}">bare redis-py, same machine</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def table(data: Dict[str, object]) -> str:
    """Every row of the run as a reST list-table, for the page to include."""
    out = [".. list-table::", "   :header-rows: 1", "   :widths: 34 14 22 30", "",
           "   * - measure", "     - result", "     - target", "     - beside"]
    for row in data["rows"]:  # type: ignore[attr-defined]
        value = row["value"]
        shown = f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"
        met = {True: " (met)", False: " (missed)", None: ""}[row["met"]]
        target = row["target"] if row["target"] not in ("", "-") else EMPTY
        out += [f"   * - {row['metric']}", f"     - {shown} {row['unit']}",
                f"     - {target}{met}", f"     - {row['detail'] or EMPTY}"]
    return "\n".join(out) + "\n"


def capacity_table(data: Dict[str, object]) -> str:
    """The run's CPU per task and what one core carries, as a reST list-table."""
    out = [".. list-table::", "   :header-rows: 1", "   :widths: 30 10 10 12 12 26", "",
           "   * - task", "     - Redis CPU per task", "     - worker CPU per task",
           "     - tasks/s one Redis core carries", "     - tasks/s one worker core carries",
           "     - measured as"]
    for entry in data["capacity"]:  # type: ignore[attr-defined]
        out += [f"   * - {entry['case']}", f"     - {entry['redis_us']:,.1f} us",
                f"     - {entry['worker_us']:,.1f} us",
                f"     - {_count(entry['per_redis_core'])}",
                f"     - {_count(entry['per_worker_core'])}", f"     - {entry['how']}"]
    return "\n".join(out) + "\n"


def _count(value: object) -> str:
    return EMPTY if value is None else f"{value:,}"


def charts(data: Dict[str, object], capacity: Dict[str, object]) -> Dict[str, str]:
    """File name -> text, for every chart of the page and its tables: ``data`` is the
    run of the charts and of the table of every row, ``capacity`` the run of the
    capacity table."""
    return {
        "throughput.svg": svg("Throughput, no-op tasks (higher is better)", "/s",
                              throughput_bars(data), 0),
        "latency.svg": svg("Latency (lower is better)", "ms", latency_bars(data), 2),
        "rows.inc": table(data),
        "capacity.inc": capacity_table(capacity),
    }


def main() -> int:
    for name, text in charts(load(), load(HERE / "capacity.json")).items():
        (HERE / name).write_text(text)
        print(f"wrote {HERE / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
