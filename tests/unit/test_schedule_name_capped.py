"""A schedule's name is at most 175 bytes: its runs' task ids (``name@`` and the
tick's time) stay within the 200 every task id may have (probe 12 M2: a 100,000-byte
name was taken, each tick sent a task whose id was as long, logged whole)."""
from __future__ import annotations

import pytest

from minitask import ConfigurationError, Minitask
from minitask.periodic import MAX_NAME_BYTES
from minitask.wire.message import MAX_ID_BYTES

pytestmark = pytest.mark.app("named")


def test_the_longest_name_makes_the_longest_id(app: Minitask) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    app.add_schedule("n" * MAX_NAME_BYTES, add, every=1, args=(1, 1))
    [schedule] = app.schedules()
    assert len(schedule.tick_id(0).encode()) == MAX_ID_BYTES


@pytest.mark.parametrize("name", ["n" * (MAX_NAME_BYTES + 1), "é" * 88, "n" * 100_000])
def test_a_longer_name_is_refused_naming_its_length(app: Minitask, name: str) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ConfigurationError, match=f"longer than {MAX_NAME_BYTES}"):
        app.add_schedule(name, add, every=1, args=(1, 1))

    def tick() -> None: ...

    with pytest.raises(ConfigurationError, match=f"longer than {MAX_NAME_BYTES}"):
        app.periodic(every=1, name=name)(tick)
    assert app.schedules() == []
