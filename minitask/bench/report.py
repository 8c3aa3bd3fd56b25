"""What ``minitask bench`` reports: one ``Row`` per measured figure, gathered in a
``Report`` printed as a table or as JSON, and the statistics the rows are made of."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ..printable import own_logger
from .capacity import Capacity

#: the progress lines are the bench's as a whole, whichever module measures
logger = own_logger("minitask.bench")


@dataclass
class Row:
    """One measured figure with its target (``met`` is None when it has none)."""

    metric: str
    value: float
    unit: str
    target: str
    met: Optional[bool]
    detail: str = ""


@dataclass
class Report:
    rows: List[Row] = field(default_factory=list)
    baselines: Dict[str, float] = field(default_factory=dict)
    #: bare redis-py latencies, in ms
    latency_baselines: Dict[str, float] = field(default_factory=dict)
    scaling: List[Dict[str, Any]] = field(default_factory=list)
    machine: Dict[str, Any] = field(default_factory=dict)
    #: CPU per task by kind of task, and what one core carries
    capacity: Capacity = field(default_factory=Capacity)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        mark = "" if row.met is None else (" ok" if row.met else " MISSED")
        progress(f"  {row.metric}: {row.value:,.2f} {row.unit} (target {row.target}){mark}")

    def as_json(self) -> str:
        return json.dumps({"machine": self.machine, "baselines": self.baselines,
                           "latency_baselines_ms": self.latency_baselines,
                           "rows": [row.__dict__ for row in self.rows],
                           "capacity": self.capacity.entries,
                           "scaling": self.scaling}, indent=2)

    def as_table(self) -> str:
        lines = [f"minitask bench on {self.machine.get('cpus')} CPU(s), Redis "
                 f"{self.machine.get('redis_version')}, Python {self.machine.get('python')}", ""]
        lines.append("baselines (bare redis-py, same run):")
        for name, value in self.baselines.items():
            lines.append(f"  {name:<44} {value:>12,.0f} /s")
        for name, value in self.latency_baselines.items():
            lines.append(f"  {name:<44} {value:>12,.2f} ms")
        lines += ["", f"{'metric':<46} {'value':>14}  {'target':<34} met"]
        for row in self.rows:
            met = "-" if row.met is None else ("yes" if row.met else "NO")
            shown = f"{row.value:,.2f} {row.unit}"
            lines.append(f"{row.metric:<46} {shown:>14}  {row.target:<34} {met}")
            if row.detail:
                lines.append(f"{'':<46} {row.detail}")
        lines += self.capacity.table()
        if self.scaling:
            lines += self._scaling_table()
        return "\n".join(lines)

    def _scaling_table(self) -> List[str]:
        lines = ["", "scaling (prefetch 1):",
                 f"  {'processes':>9} {'delayed':>8} {'drain /s':>10} {'pickup p50':>11} "
                 f"{'p99 ms':>7}"]
        for entry in self.scaling:
            if "worker_processes" in entry:
                lines.append(f"  {entry['worker_processes']:>9} {entry['delayed_pending']:>8} "
                             f"{entry['drain_tasks_per_s']:>10,} "
                             f"{entry['pickup_p50_ms']:>11.2f} {entry['pickup_p99_ms']:>7.2f}")
        lines += ["", f"  {'queue length':>12} {'delay() us':>11} {'fetch+ack us':>13}"]
        for entry in self.scaling:
            if "queue_length" in entry:
                lines.append(f"  {entry['queue_length']:>12,} {entry['delay_us']:>11} "
                             f"{entry['fetch_plus_ack_us']:>13}")
        return lines


def progress(text: str) -> None:
    """Say what the bench is measuring now (the report is printed only at the end)."""
    logger.info("%s", text)


def percentile(values: Sequence[float], share: float) -> float:
    """The value ``share`` (0 to 1) of the way up the sorted values, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def median(values: Sequence[float]) -> float:
    """The middle value (the upper one of an even count)."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
