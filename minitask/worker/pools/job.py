"""What every pool needs of a leased task: an id to name it by in the log."""
from __future__ import annotations

from typing import Protocol, TypeVar


class PoolJob(Protocol):
    """A leased task as a pool sees it: something with an id to log."""

    @property
    def task_id(self) -> str: ...


J = TypeVar("J", bound=PoolJob)
