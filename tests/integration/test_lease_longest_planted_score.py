"""A ``lease_longest`` score no worker can say (inf, past ``MAX_SECONDS``: planted)
is taken out when a worker says its own, on a real redis-server: ``ZADD GT`` alone
kept it for ever, and with it the queue's planted leases, never reclaimed (issue 29,
crash test of the far-ahead lease check)."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.wire.message import MAX_SECONDS

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server")]


@pytest.mark.parametrize("planted", [float("inf"), 1e300, MAX_SECONDS * 1000 + 1])
def test_a_score_no_worker_can_say_gives_way_to_the_workers_own(
        app: Minitask, admin: "redis.Redis[bytes]", planted: float) -> None:
    longest = queue_keys(app.name, "default").lease_longest
    admin.zadd(longest, {"ms": planted, "other": planted})
    assert not app.worker(burst=True).run_once()  # says it before the first fetch
    assert admin.zrange(longest, 0, -1, withscores=True) == [
        (b"ms", app.visibility_timeout * 1000)]


def test_the_longest_a_worker_can_say_is_kept(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    longest = queue_keys(app.name, "default").lease_longest
    admin.zadd(longest, {"ms": MAX_SECONDS * 1000})
    assert not app.worker(burst=True).run_once()
    assert admin.zscore(longest, "ms") == MAX_SECONDS * 1000
