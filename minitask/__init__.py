"""minitask: a Celery-style task framework for Python on Redis."""
from __future__ import annotations

__version__ = "0.1.0"
