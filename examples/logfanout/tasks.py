"""Log distribution: every processor of the group analyses every batch of lines.

Start processors (each a subscriber, named with ``--name``)::

    minitask worker -A examples.logfanout.tasks --pool thread --name p1
    minitask worker -A examples.logfanout.tasks --pool thread --name p2

then send a file with ``python -m examples.logfanout.producer app.log``: each
batch is one broadcast call, run once by every processor; the producer waits
with ``join()`` until all of them report, and prints each one's totals.
"""
from __future__ import annotations

from typing import Dict, List

from minitask import Minitask

app = Minitask("logfanout")

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@app.task(broadcast=True, queue="logs", retries=2)
def analyse(lines: List[str]) -> Dict[str, int]:
    """Count a batch's lines, bytes and lines per level (``<time> <host> <LEVEL> ...``)."""
    totals = {"lines": len(lines), "bytes": sum(len(line.encode()) for line in lines)}
    for line in lines:
        parts = line.split(" ", 3)
        level = parts[2] if len(parts) > 2 and parts[2] in LEVELS else "OTHER"
        totals[level] = totals.get(level, 0) + 1
    return totals
