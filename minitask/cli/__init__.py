"""The ``minitask`` command line: one module per command, assembled in ``main``."""
from __future__ import annotations

from .main import main

__all__ = ["main"]
