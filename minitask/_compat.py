"""The one place that branches on the Python version."""
from __future__ import annotations

import sys

if sys.version_info >= (3, 10):
    from importlib.metadata import EntryPoint, entry_points
    from typing import ParamSpec
else:  # pragma: no cover - exercised on Python 3.9 only
    from typing import Any, TypeVar

    from importlib_metadata import EntryPoint, entry_points

    def ParamSpec(name: str) -> Any:  # noqa: N802 - stands in for the 3.10 class
        """A TypeVar in the ParamSpec's place: with postponed annotations, ``P.args``
        is never evaluated at run time, and mypy checks against 3.10+ typing."""
        return TypeVar(name)


def entry_points_of(group: str) -> list[EntryPoint]:
    """Entry points of ``group``, with the 3.10+ selection API on every Python."""
    return list(entry_points(group=group))


__all__ = ["EntryPoint", "ParamSpec", "entry_points_of"]
