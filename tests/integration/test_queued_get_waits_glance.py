"""get() waits in threads queued for a connection of a full waits' pool, on a real
redis-server: they share one glance, as ``aget()``'s queued waits do, reading at most
``GLANCE_KEYS`` keys a time in turn (600 waiting threads cost about 1,000 LINDEX a
second, not 6,000), every result already there is still seen within a turn of the
keys, and each ``get(timeout=T)`` still raises at its own deadline; a glance that
fails as a whole fails no wait and is said once (the last session's open LOW).

Before the fix each queued thread read its own key every ``GLANCE_EVERY`` s.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, List, Tuple

import pytest
import redis

from minitask import Minitask, ResultTimeout
from minitask.broker.pools import GLANCE_EVERY, GLANCE_KEYS, ResultWaits
from tests.support.queued_waits import lindex_calls, run_served, timed_gets, unserved_and_served
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Connections of the broker's pool, so of the waits' pool.
POOL = 4
#: Threads waiting at once, nearly all of them queued.
THREADS = 600
#: Each queued wait's timeout.
T = 4.0
#: How late a wait may raise on a loaded 2-core machine with 600 threads.
MARGIN = 1.5
#: Bounds the whole of each test.
DEADLINE = 90.0


def _app(redis_server: RedisServer) -> Minitask:
    return Minitask("getglances", broker=f"{redis_server.url}?max_connections={POOL}")


def _joined(threads: List[threading.Thread], deadline: float) -> None:
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "waits never ended"


def test_hundreds_of_queued_get_threads_glance_at_a_bounded_rate_within_their_deadlines(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app = _app(redis_server)
    never, done = unserved_and_served(app)
    queued = [never.delay(n) for n in range(THREADS)]
    finished = [done.delay(n) for n in range(10)]
    run_served(app, len(finished), DEADLINE)
    give_up = time.monotonic() + DEADLINE
    try:
        ran_out: List[Tuple[float, Any]] = []
        threads = timed_gets(queued, T, ran_out)
        time.sleep(1.0)  # every thread queued by now, POOL of them blocking
        before, began = lindex_calls(admin), time.monotonic()
        read: List[Tuple[float, Any]] = []
        _joined(timed_gets(finished, 10.0, read), give_up)
        time.sleep(max(0.0, began + 1.5 - time.monotonic()))
        rate = (lindex_calls(admin) - before) / (time.monotonic() - began)
        _joined(threads, give_up)
    finally:
        app.close()
    most = GLANCE_KEYS / GLANCE_EVERY
    assert rate < 1.3 * most, f"{rate:.0f} LINDEX a second for {THREADS} queued get() waits"
    assert sorted(value for _, value in read) == list(range(10)), read
    # a turn of 610 keys, GLANCE_KEYS a glance: 7 glances, and room for a loaded machine
    latest = max(seconds for seconds, _ in read)
    assert latest < 3.0, f"results already there, queued behind {THREADS}, read after " \
                         f"{latest:.2f} s"
    assert all(isinstance(outcome, ResultTimeout) for _, outcome in ran_out), \
        [outcome for _, outcome in ran_out if not isinstance(outcome, ResultTimeout)][:3]
    assert min(seconds for seconds, _ in ran_out) >= T - 0.05
    latest = max(seconds for seconds, _ in ran_out)
    assert latest < T + MARGIN, f"the last of {THREADS} waits of {T} s raised after " \
                                f"{latest:.2f} s"


class _FailingPipeline:
    """A client whose pipelines fail as a whole: every glance fails."""

    def __init__(self, client: "redis.Redis[bytes]") -> None:
        self._client = client

    def pipeline(self, transaction: bool = True) -> Any:
        raise redis.ConnectionError("the sending pool is gone")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_failed_glance_fails_no_queued_get_and_is_said_once(
        admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    """Every glance fails: the queued waits each read their own key at their deadline
    (a result there is returned, none is None), and the log says so once."""
    waits = ResultWaits(_FailingPipeline(admin))
    gate, _ = waits._gate()
    while gate.acquire(blocking=False):  # every waiting connection taken
        pass
    admin.rpush("ready", b"value")
    got: List[Any] = []
    with caplog.at_level(logging.WARNING, logger="minitask.broker.pools"):
        threads = [threading.Thread(target=lambda k=key: got.append(waits.read(k, 0.5)))
                   for key in ("ready", "absent", "absent")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(DEADLINE)
    waits.close()
    assert sorted(got, key=repr) == sorted([b"value", None, None], key=repr)
    said = [r for r in caplog.records if "queued get() waits failed" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
