"""A worker's Redis step that meets an exhausted connection pool (``pool exhausted``:
the client's limit, not Redis's) says so, naming max_connections, never "Redis
refused"; a heartbeat step rides it out (raised, so that the heartbeat backs off)
rather than logging it as a refusal and giving up until the next beat."""
from __future__ import annotations

import logging

import pytest

from minitask.broker.pools import PoolExhausted
from minitask.broker.refusals import broker_error
from minitask.errors import BrokerError
from minitask.worker.outages import Backoff, beat_step


def _exhausted() -> BrokerError:
    return broker_error(PoolExhausted("all 1 connections of the client's pool stayed in use "
                                      "for 0.05 s"), "renew the leases", "redis://127.0.0.1:1/0")


def test_an_exhausted_pool_is_said_as_such_and_its_end_too(
        caplog: pytest.LogCaptureFixture) -> None:
    backoff = Backoff("fetch tasks")
    with caplog.at_level(logging.WARNING, logger="minitask"):
        assert backoff.failed(_exhausted()) >= 0
        backoff.failed(_exhausted())
        backoff.succeeded()
    text = caplog.text
    assert "Redis refused" not in text and "Redis is back" not in text and "lost Redis" \
        not in text, text
    said = [r.getMessage() for r in caplog.records if "pool is exhausted" in r.getMessage()]
    assert len(said) == 1 and "max_connections" in said[0] and "?max_connections=" in said[0]
    assert "retrying with backoff" in said[0]
    assert "free connection again" in text


def test_a_heartbeat_step_rides_an_exhausted_pool_out() -> None:
    def step() -> None:
        raise _exhausted()

    with pytest.raises(BrokerError) as raised:
        beat_step(step, set())
    assert raised.value.reason == "pool exhausted"


def test_the_end_of_an_exhausted_pool_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    """A heartbeat's Backoff lives as long as its worker and succeeds at every beat:
    the pool's end is said once, not at every later success."""
    backoff = Backoff("renew the leases")
    with caplog.at_level(logging.WARNING, logger="minitask"):
        backoff.failed(_exhausted())
        for _ in range(4):
            backoff.succeeded()
        backoff.failed(_exhausted())
        backoff.gave_up()
        backoff.succeeded()
    ends = [r for r in caplog.records if "free connection again" in r.getMessage()]
    assert len(ends) == 1 and "after 1 failed tries" in ends[0].getMessage()
