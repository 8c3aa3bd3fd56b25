"""``minitask bench``: throughput, latency, memory and Redis cost, measured.

Imported only by the ``bench`` command, never by the runtime: ``drain`` holds
the main rows, and each feature's rows sit in a module of their own.
"""
