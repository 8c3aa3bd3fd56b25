"""Enqueue the shop's emails and print what became of each.

Run from the repository root while a worker runs::

    python -m examples.orders.producer [--timeout SECONDS] [--sale-in SECONDS]
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, List, Optional, Sequence, Tuple

from minitask import ResultTimeout, TaskFailed, TaskHandle

from .tasks import put_on_sale, send_item_sold, send_newsletter, send_password_reset, send_receipt


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Enqueue the shop's emails, print results.")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds to wait for each result (default 30)")
    parser.add_argument("--sale-in", type=float, default=2.0,
                        help="seconds from now until the sale starts (default 2)")
    options = parser.parse_args(argv)

    # A backlog of newsletters first: the reset enqueued after them still goes out first.
    newsletters = send_newsletter.delay_many([(user_id, "March deals")
                                              for user_id in range(1, 6)])
    calls: List[Tuple[str, TaskHandle[Any]]] = [
        ("password reset", send_password_reset.delay(42)),
        ("item sold", send_item_sold.delay(1001, "brass lamp", "bob@example.com")),
        ("receipt", send_receipt.delay(1001, "ann@example.com")),
        (f"sale in {options.sale_in:g} s",
         put_on_sale.apply_in(options.sale_in, "brass lamp", 20)),
    ]
    calls += [(f"newsletter {n}", handle) for n, handle in enumerate(newsletters, 1)]

    failed = 0
    for label, handle in calls:
        try:
            outcome = repr(handle.get(timeout=options.timeout))
        except ResultTimeout as exc:
            print(f"no result for {label}: {exc}", file=sys.stderr)
            return 1
        except TaskFailed as exc:
            failed += 1
            outcome = f"{exc.exc_type}: {exc.message}"
        print(f"{label:<16} {handle.status():<10} {outcome}  (task {handle.id})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
