"""What no error reveals is said out loud: a clock far from Redis's (at a worker's
start-up, and for every worker in ``minitask status``), and a durability setting the
primary's replicas cannot meet."""
from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from minitask import Minitask
from minitask.broker.health import (CLOCK_SKEW_BOUND_MS, clock_skew_ms, replica_warning,
                                    skew_warning)


def an_hour_behind(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis's clock an hour behind this machine's: this machine is an hour ahead."""
    def redis_time() -> Any:
        now_us = round(time.time() * 1_000_000) - 3_600_000_000
        return now_us // 1_000_000, now_us % 1_000_000

    monkeypatch.setattr(client, "time", redis_time)


def test_the_skew_is_this_clock_minus_redis_and_a_small_one_is_not_worth_a_word(
        app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    client = app.broker.client
    assert abs(clock_skew_ms(client) or 0) < CLOCK_SKEW_BOUND_MS
    assert skew_warning(clock_skew_ms(client), "this machine's") is None
    an_hour_behind(client, monkeypatch)
    skew = clock_skew_ms(client)
    assert skew is not None and 3_599_000 < skew < 3_601_000
    assert skew_warning(skew, "this machine's") == (
        "this machine's clock is 3600.0 s ahead of Redis's: delayed tasks and schedule ticks "
        "it writes are off by as much (synchronise it with NTP)")
    assert "behind Redis's" in (skew_warning(-5000, "worker w1's") or "")


def test_a_durability_the_replicas_cannot_meet_is_named_with_its_cost() -> None:
    assert replica_warning(None, 1, 0, 1.0) is None
    assert replica_warning("replicated", 1, 1, 1.0) is None
    assert replica_warning("replicated", 1, None, 1.0) is None  # could not ask: no guess
    text = replica_warning("replicated", 2, 1, 0.5) or ""
    assert "asks 2 replica(s)" in text and "the primary has 1" in text and "0.5 s" in text


def test_a_worker_says_at_start_up_that_its_clock_is_far_from_redis(
        fake_redis: Any, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    app = Minitask("clocks", broker=fake_redis)  # the machine's clock: a test clock is none
    an_hour_behind(app.broker.client, monkeypatch)
    worker = app.worker(burst=True)
    with caplog.at_level(logging.WARNING, logger="minitask.worker.loop"):
        worker.run()
    assert any("this worker's clock is 3600.0 s ahead of Redis's" in record.getMessage()
               for record in caplog.records)
    assert worker.clock_skew_ms is not None and worker.clock_skew_ms > 3_599_000


def test_a_durability_timeout_the_socket_timeout_would_cut_short_is_refused() -> None:
    import fakeredis

    from minitask import ConfigurationError
    client = fakeredis.FakeRedis(socket_timeout=1.0)
    app = Minitask("durable", broker=client, durability="replicated", durability_timeout=2.0)
    with pytest.raises(ConfigurationError, match=r"durability_timeout of 2 s is not shorter "
                                                 r"than the Redis socket timeout of 1 s"):
        app.broker
    fine = Minitask("durable", broker=client, durability="replicated", durability_timeout=0.5)
    assert fine.broker.transport.durability.timeout == 0.5
    # no app-wide durability, but a call may ask for one and would meet the timeout it
    # chose after writing: refused as well (issue 29, M5)
    plain = Minitask("plain", broker=client, durability_timeout=2.0)
    with pytest.raises(ConfigurationError, match="durability_timeout of 2 s"):
        plain.broker
    assert Minitask("plain", broker=client).broker is not None  # the default: checked per call
