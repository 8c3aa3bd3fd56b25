"""The worker: fetch -> run -> ack / retry / dead-letter, with leases, signals and grace.

``loop`` composes the parts, each with one job: ``sources`` (where work comes
from), ``runner`` (running an attempt), ``outcomes`` (recording how it ended),
``leases`` (what is held, and the heartbeat that keeps it), ``stop`` (signals,
grace, give-back); ``outages`` rides out Redis going away, and ``host`` says
what the worker needs of the app.
"""
from __future__ import annotations

from .leases import Job
from .loop import MAX_PREFETCH, Worker, check_prefetch
from .outages import MAX_BACKOFF, Backoff
from .outcome_batches import ACK_WINDOW

__all__ = ["ACK_WINDOW", "MAX_BACKOFF", "MAX_PREFETCH", "Backoff", "Job", "Worker",
           "check_prefetch"]
