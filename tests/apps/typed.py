"""An app with registered argument types (an Enum, a value class), for workers and
for a second program that rebuilds handles; the broker comes from MINITASK_BROKER_URL.

``python -m tests.apps.typed handle|group <id> <out>`` is that second program: it
rebuilds a task's (``app.handle``) or a group's (``app.group_handle``) handle from
the id alone, writes ``<out>.waiting`` just before it waits, then ``repr()`` of the
result (or of the error) to ``<out>``.
"""
from __future__ import annotations

import dataclasses
import decimal
import enum
import sys
from pathlib import Path
from typing import Any, List, Optional

from minitask import Minitask


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Money:
    amount: decimal.Decimal
    currency: str


def _pack_money(value: Money) -> bytes:
    return f"{value.amount} {value.currency}".encode()


def _unpack_money(data: bytes) -> Money:
    amount, currency = data.decode().split()
    return Money(decimal.Decimal(amount), currency)


def build(broker: Optional[Any] = None) -> Minitask:
    """The app, its types and its tasks (the test's producer builds the same)."""
    made = Minitask("typed", broker=broker, visibility_timeout=30)
    made.register_type(Color, 40, lambda c: c.value.encode(), lambda b: Color(b.decode()))
    made.register_type(Money, 42, _pack_money, _unpack_money)

    @made.task(name="typed.add")
    def add(a: int, b: int) -> int:
        return a + b

    @made.task(name="typed.describe")
    def describe(*values: Any) -> List[Any]:
        """Each value with its type's name, as the task received it."""
        return [[type(value).__name__, value] for value in values]

    @made.task(name="typed.double")
    def double(money: Money) -> Money:
        return Money(money.amount * 2, money.currency)

    return made


app = build()


def main(kind: str, some_id: str, out: str) -> int:
    target = Path(out)
    try:
        handle: Any = app.handle(some_id) if kind == "handle" else app.group_handle(some_id)
        Path(out + ".waiting").write_text("waiting")
        result = repr(handle.get(timeout=120))
    except Exception as exc:  # the test reads what went wrong from the file
        result = f"error {type(exc).__name__}: {exc}"
    target.write_text(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
