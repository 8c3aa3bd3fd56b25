"""Fixtures of the unit tests that several of their modules share."""
from __future__ import annotations

from typing import Any

import pytest

from minitask import Minitask, Task


@pytest.fixture
def add(app: Minitask, fake_redis: Any) -> Task[Any, Any]:
    """A task "shop.add" on the test's app, with Redis already holding a queued and a
    scheduled call of it, so that "Redis is unchanged" means something."""
    @app.task(name="shop.add")
    def add(x: Any = 0, y: Any = 0) -> Any:
        return x + y

    add.delay(1, 2)
    add.apply_in(60, 3, 4)
    return add
