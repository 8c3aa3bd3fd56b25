"""The worker: fetch -> run -> ack / retry / dead-letter, with leases, signals and grace."""
from __future__ import annotations

from .loop import (ACK_WINDOW, MAX_BACKOFF, MAX_PREFETCH, Backoff, Job, Worker,
                   check_prefetch)

__all__ = ["ACK_WINDOW", "MAX_BACKOFF", "MAX_PREFETCH", "Backoff", "Job", "Worker",
           "check_prefetch"]
