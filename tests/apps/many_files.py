"""tests.apps.basic, served by a worker that holds many open files.

With ``TEST_HOLD_FILES`` set, importing this module raises the soft limit on
open files and opens that many, so every socket the worker (and each child of
its process pool, which inherits them) opens afterwards gets a descriptor
number above 1024: beyond what ``select.select`` can watch.
"""
from __future__ import annotations

import os
import resource
from typing import List

from tests.apps.basic import app

__all__ = ["app", "hold_files"]

_held: List[int] = []


def hold_files(count: int) -> List[int]:
    """Open ``count`` descriptors (on /dev/null), raising the soft limit as needed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            raise RuntimeError(f"the hard limit on open files ({hard}) is below {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(count)]
    _held.extend(opened)
    return opened


if os.environ.get("TEST_HOLD_FILES"):
    hold_files(int(os.environ["TEST_HOLD_FILES"]))
