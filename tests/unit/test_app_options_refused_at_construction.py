"""``Minitask(...)`` refuses an ``async_broker``, a ``clock`` or a ``min_replicas`` it
cannot use, naming the option (probe29r L5): ``async_broker="x"`` (or nan, or an int)
and ``clock="x"`` were taken and failed at the first send with a raw AttributeError;
``min_replicas=10**30`` was taken and every send wrote its task, then raised
DurabilityError. No I/O happens at construction: no Redis is needed."""
from __future__ import annotations

from typing import Any, Dict

import pytest
import redis
import redis.asyncio

from minitask import Minitask
from minitask.broker.durability import MAX_MIN_REPLICAS
from minitask.errors import ConfigurationError
from tests.support.clock import ManualClock

URL = "redis://127.0.0.1:1/0"  # never connected to


@pytest.mark.parametrize("options, named", [
    ({"async_broker": "x"}, "async_broker"),
    ({"async_broker": float("nan")}, "async_broker"),
    ({"async_broker": 3}, "async_broker"),
    ({"async_broker": redis.Redis()}, "async_broker"),  # a blocking client
    ({"clock": "x"}, "clock"),
    ({"clock": 5}, "clock"),
    ({"durability": "replicated", "min_replicas": 10**30}, "min_replicas"),
    ({"durability": "replicated", "min_replicas": MAX_MIN_REPLICAS + 1}, "min_replicas"),
    ({"min_replicas": float("nan")}, "min_replicas"),
])
def test_an_option_the_app_cannot_use_is_refused_naming_it(options: Dict[str, Any],
                                                           named: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"app 'c': {named} must be"):
        Minitask("c", broker=URL, **options)


def test_the_options_it_can_use_are_taken() -> None:
    clock = ManualClock()
    client = redis.asyncio.Redis()
    app = Minitask("c", broker=URL, async_broker=client, clock=clock,
                   durability="replicated", min_replicas=MAX_MIN_REPLICAS)
    assert app.clock is clock and app.durability.min_replicas == MAX_MIN_REPLICAS
    assert Minitask("c", broker=URL, async_broker=None, clock=None).clock.now_ms() > 0
