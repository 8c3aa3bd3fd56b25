"""The markers tasks of the worker-process tests leave in Redis: ``id:attempt:pid:delivery``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class Mark:
    """One marker a task left: which task, on which attempt and delivery, in which process."""

    task_id: str
    attempt: int
    pid: int
    delivery: int


def parse_mark(raw: Union[bytes, str]) -> Mark:
    text = raw.decode() if isinstance(raw, bytes) else raw
    task_id, attempt, pid, delivery = text.rsplit(":", 3)
    return Mark(task_id, int(attempt), int(pid), int(delivery))
