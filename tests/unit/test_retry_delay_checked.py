"""``Retry(delay=...)`` takes a finite number of seconds from 0 to 100 years, or None:
any other delay is the task's own error (probe 12 M1: nan, inf and text died as an
"internal error" of an "(undecodable)" task, uncounted; 1e300 scheduled the retry for
never, and the listings called its score foreign data)."""
from __future__ import annotations

import math
from typing import Any

import pytest

from minitask import Minitask, Retry
from minitask.errors import _MOST_SECONDS
from minitask.wire.message import MAX_SECONDS
from tests.support.clock import ManualClock
from tests.support.draining import drain

pytestmark = pytest.mark.app("retries")


def test_the_cap_is_the_options_cap() -> None:
    assert _MOST_SECONDS == MAX_SECONDS


@pytest.mark.parametrize("delay", [None, 0, 0.2, 5, MAX_SECONDS])
def test_a_delay_in_range_is_taken(delay: Any) -> None:
    assert Retry(delay).delay == delay


@pytest.mark.parametrize("delay", [math.nan, math.inf, -math.inf, -1, "x", 1e300,
                                   MAX_SECONDS + 1, True])
def test_a_delay_out_of_range_is_refused_naming_it(delay: Any) -> None:
    with pytest.raises(ValueError, match=r"Retry\(delay=.*the delay must be"):
        Retry(delay)


def test_a_task_asking_a_bad_delay_fails_by_its_options_naming_it(
        app: Minitask, clock: ManualClock) -> None:
    @app.task(retries=3, retry_on=(KeyError,), name="asks")
    def asks(delay: float) -> None:
        raise Retry(delay=delay)

    handle = asks.delay(math.nan)
    drain(app.worker(burst=True))
    assert handle.status() == "failed"  # a ValueError: not retried by these options
    [dead] = app.dead_letters()
    assert dead.task_id == handle.id and dead.exc_type == "ValueError"
    assert "Retry(delay=nan)" in dead.message and dead.attempts == 1
