"""The one place that would branch on the Python version (3.11+ needs no branch today)."""
from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import ParamSpec


def entry_points_of(group: str) -> list[EntryPoint]:
    """Entry points of ``group``, selected by the 3.10+ API."""
    return list(entry_points(group=group))


__all__ = ["EntryPoint", "ParamSpec", "entry_points_of"]
