"""The data that travels through Redis: one enqueued call and one outcome.

Redis stores integer milliseconds; the public API speaks float seconds.
The helpers here are the only place that converts between the two.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

ENVELOPE_VERSION = 1

#: The states ``TaskHandle.status()`` can report.
STATUSES = ("scheduled", "queued", "running", "retrying", "succeeded", "failed",
            "cancelled", "unknown")


def to_ms(seconds: float) -> int:
    """Seconds (float) to whole milliseconds, rounding up so nothing fires early."""
    ms = seconds * 1000.0
    whole = int(ms)
    return whole + 1 if ms > whole else whole


def to_seconds(ms: int) -> float:
    return ms / 1000.0


def wall_ms() -> int:
    """Wall-clock time in integer milliseconds since the Unix epoch."""
    return time.time_ns() // 1_000_000


class SystemClock:
    """The real clock; tests swap in a clock whose time they move by hand."""

    def now_ms(self) -> int:
        return wall_ms()


@dataclass(frozen=True)
class Message:
    """One enqueued call of a task, as it is stored in Redis."""

    id: str
    task: str
    args: List[Any]
    kwargs: Dict[str, Any]
    queue: str
    priority: int
    enqueued_at_ms: int
    eta_ms: Optional[int] = None
    attempt: int = 1


@dataclass(frozen=True)
class Outcome:
    """How an attempt or a whole task ended: a result, a retry note or a dead letter."""

    status: str
    finished_at_ms: int
    value: Any = None
    exc_type: str = ""
    message: str = ""
    traceback: str = ""
    reason: str = ""
    attempt: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)
