"""A clock that tests move by hand."""
from __future__ import annotations


class ManualClock:
    """A clock that moves only when a test says so."""

    def __init__(self, now_ms: int = 1_800_000_000_000) -> None:
        self.ms = now_ms

    def now_ms(self) -> int:
        return self.ms

    def advance(self, seconds: float) -> None:
        self.ms += int(round(seconds * 1000))
