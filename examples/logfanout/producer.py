"""Send a log file's lines to every processor, wait for all of them, print their totals.

``python -m examples.logfanout.producer [FILE] [--batch N] [--timeout S]``
(default FILE: the sample.log beside this file). Exits 1 when no processor
subscribes to the ``logs`` queue, or one did not report within the timeout.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Optional, Sequence

from minitask import BroadcastHandle, ResultTimeout, TaskFailed
from examples.logfanout.tasks import analyse, app

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample.log")


def send(lines: List[str], batch: int) -> List[BroadcastHandle]:
    """One broadcast call per batch of lines, in order."""
    handles = analyse.delay_many([(lines[i:i + batch],) for i in range(0, len(lines), batch)])
    return [h for h in handles if isinstance(h, BroadcastHandle)]


def totals(handles: List[BroadcastHandle], timeout: float) -> Dict[str, Dict[str, int]]:
    """Each processor's totals over every batch; raises ResultTimeout naming the late."""
    found: Dict[str, Dict[str, int]] = {}
    for handle in handles:
        for name, outcome in handle.join(timeout=timeout).items():
            if isinstance(outcome, TaskFailed):
                raise SystemExit(f"processor {name} failed batch {handle.id}: {outcome}")
            into = found.setdefault(name, {})
            for key, count in outcome.items():
                into[key] = into.get(key, 0) + count
    return found


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default=SAMPLE)
    parser.add_argument("--batch", type=int, default=50, help="lines per broadcast call")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait")
    args = parser.parse_args(argv)
    with open(args.file, encoding="utf-8") as file:
        lines = [line.rstrip("\n") for line in file if line.strip()]
    processors = [s.name for s in app.subscribers("logs")]
    if not processors:
        print("no processor subscribes to queue 'logs': start minitask worker -A "
              "examples.logfanout.tasks --name NAME first")
        return 1
    handles = send(lines, args.batch)
    print(f"sent {len(lines)} lines of {args.file} as {len(handles)} broadcast calls to "
          f"{len(processors)} processor(s): {', '.join(processors)}")
    try:
        found = totals(handles, args.timeout)
    except ResultTimeout as exc:
        print(f"not every processor reported: {exc}")
        return 1
    missing = [name for name in processors if found.get(name, {}).get("lines") != len(lines)]
    if missing:
        print(f"processor(s) {', '.join(missing)} did not analyse every line")
        return 1
    for name, counts in sorted(found.items()):
        levels = ", ".join(f"{key} {value}" for key, value in sorted(counts.items())
                           if key not in ("lines", "bytes"))
        print(f"processor {name}: {counts['lines']} lines, {counts['bytes']} bytes ({levels})")
    app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
