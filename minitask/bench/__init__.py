"""``minitask bench``: throughput, latency, memory and Redis cost, measured.

Imported only by the ``bench`` command, never by the runtime. ``run`` runs the
rows in order; the main rows (``drain``, ``latency``, ``memory``, ``scaling``)
share a ``session`` and the tasks of ``tasks``; each feature's rows sit in a
module of their own; ``workers``, ``servers``, ``report`` and ``scratch`` are
the processes, redis-servers, report and keys they all use.
"""
