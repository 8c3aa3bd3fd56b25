"""A worker's concurrency and grace, and ``get``'s timeout, refuse values out of range."""
from __future__ import annotations

import math
from typing import Any, Callable

import pytest

from minitask import ConfigurationError, Minitask
from minitask.worker import Worker


@pytest.mark.parametrize("pool,concurrency", [("thread", 1001), ("process", 257),
                                              ("asyncio", 10_001), ("thread", 0),
                                              ("thread", True)])
def test_concurrency_beyond_the_bound_is_refused(make_app: Callable[..., Minitask], pool: str,
                                                 concurrency: Any) -> None:
    app = make_app("shop")
    with pytest.raises(ConfigurationError, match="concurrency"):
        Worker(app, ["default"], pool=pool, concurrency=concurrency)


@pytest.mark.parametrize("grace", [-1, math.nan, math.inf, "5"])
def test_a_grace_that_is_not_a_finite_number_of_seconds_is_refused(
        make_app: Callable[..., Minitask], grace: Any) -> None:
    with pytest.raises(ConfigurationError, match="grace"):
        make_app("shop").worker(grace=grace)


def test_get_with_a_nan_timeout_is_refused(make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")
    job = app.task(lambda: None, name="shop.job")
    with pytest.raises(ConfigurationError, match="timeout"):
        job.delay().get(timeout=math.nan)
