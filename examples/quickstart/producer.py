"""Enqueue a few quick-start tasks and print their results.

Run from the repository root while a worker runs::

    python -m examples.quickstart.producer [--timeout SECONDS]
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, List, Optional, Sequence, Tuple

from minitask import ResultTimeout, TaskFailed, TaskHandle

from .tasks import add, patient_hello, word_count


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Enqueue quick-start tasks, print results.")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds to wait for each result (default 30)")
    timeout = parser.parse_args(argv).timeout

    calls: List[Tuple[str, TaskHandle[Any]]] = [
        ("add(2, 3)", add.delay(2, 3)),
        ("add(10, 20) in 1 s", add.apply_in(1.0, 10, 20)),
        ("word_count(...)", word_count.delay("the cat saw the other cat")),
        ("patient_hello('ada')", patient_hello.delay("ada")),
    ]
    squares = add.delay_many([(n, n) for n in range(5)])
    calls += [(f"add({n}, {n}) [delay_many]", handle) for n, handle in enumerate(squares)]

    for label, handle in calls:
        try:
            value = handle.get(timeout=timeout)
        except ResultTimeout as exc:
            print(f"no result for {label}: {exc}", file=sys.stderr)
            return 1
        except TaskFailed as exc:
            # e.g. an UnknownTaskError: another worker of an app named "quickstart" took it
            print(f"{label} failed: {exc.exc_type}: {exc.message}", file=sys.stderr)
            return 1
        print(f"{label:<28} = {value!r}  (task {handle.id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
