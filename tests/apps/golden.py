"""The app the golden samples were written with (tests/golden/make_golden.py) and
read back with (tests/unit/test_golden.py): every task a sample names, under the
same names, so a later minitask can run what this one wrote."""
from __future__ import annotations

from typing import Any, List

from minitask import Minitask

#: The nested argument golden.echo was sent (and returns): every kind msgpack carries.
ECHOED = {"list": [1, 2.5, None, True], "bytes": b"\x00\xff", "text": "caf\u00e9",
          "deep": {"a": [{"b": "c"}]}}


def golden_app(broker: Any, clock: Any) -> Minitask:
    app = Minitask("golden", broker=broker, clock=clock)

    @app.task(name="golden.add")
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="golden.total")
    def total(values: List[int]) -> int:
        return sum(values)

    @app.task(name="golden.fail")
    def fail(why: str) -> None:
        raise ValueError(why)

    @app.task(name="golden.echo", queue="urgent", priority=9)
    def echo(value: Any) -> Any:
        return value

    @app.task(name="golden.reload", queue="config", broadcast=True)
    def reload(version: int) -> str:
        return f"version {version} loaded"

    return app
