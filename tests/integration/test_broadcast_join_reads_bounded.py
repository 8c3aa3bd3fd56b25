"""``join(subscribers=[...])`` reads only the subscribers it names, whatever the queue
holds: 200,000 planted subscribers made each such join read them all (``ZRANGE ... 0
-1``, 2-4.7 s, Redis blocked 100-190 ms a call). ``join()`` without names reads every
subscriber, and refuses a queue of more than JOINED_MOST, saying to name them."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis

from minitask import ConfigurationError, Minitask
from minitask.broker.keys import queue_keys
from minitask.stores.broadcast import JOINED_MOST
from tests.apps.foreign import build
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
NEWS = queue_keys("foreign", "news")
DEADLINE = 60.0
PLANTED = 50_000
#: Bytes Redis may send while a join by name runs, the worker's own commands
#: included: a read of every planted subscriber is over 1 MB.
MOST_SENT = 200_000


def sent(admin: "redis.Redis[bytes]") -> int:
    return int(admin.info("stats")["total_net_output_bytes"])


def plant(admin: "redis.Redis[bytes]", count: int) -> None:
    now_ms = int(time.time() * 1000)
    pipe = admin.pipeline(transaction=False)
    for first in range(0, count, 5000):
        names = [f"planted{i}" for i in range(first, first + 5000)]
        pipe.hset(NEWS.broadcast("cursors"), mapping={name: 0 for name in names})
        pipe.hset(NEWS.broadcast("seen"), mapping={name: now_ms for name in names})
        pipe.zadd(NEWS.broadcast("places"), {name: 0 for name in names})
        pipe.zadd(NEWS.broadcast("since"), {name: 0 for name in names})
        pipe.zadd(NEWS.broadcast("alive"), {name: now_ms for name in names})
    pipe.execute()


def test_join_by_name_reads_only_those_named_among_50000_planted_subscribers(
        app: Minitask, admin: "redis.Redis[bytes]", processes: Processes,
        redis_server: RedisServer, tmp_path: Path) -> None:
    worker = processes.worker(APP, "-Q", "news,other", "--name", "sub1",
                              env={"MINITASK_BROKER_URL": redis_server.url},
                              log=tmp_path / "worker.log")
    hear = app.tasks["hear"]
    wait_until(lambda: admin.hexists(NEWS.broadcast("cursors"), "sub1"), timeout=DEADLINE,
               message="the worker subscribed")
    assert hear.delay(0).join(timeout=DEADLINE) == {"sub1": 0}
    plant(admin, PLANTED)
    for n in range(1, 4):
        handle = hear.delay(n)
        before = sent(admin)
        assert handle.join(timeout=DEADLINE, subscribers=["sub1"]) == {"sub1": n}
        # no read of every subscriber (the worker's commands share the server: what
        # Redis sent is counted, not which commands ran)
        assert sent(admin) - before < MOST_SENT
    # a name it never went to is still refused, naming some it went to
    with pytest.raises(ConfigurationError, match="'ghost' never got this call"):
        handle.join(timeout=DEADLINE, subscribers=["sub1", "ghost"])
    # without names: every subscriber would be read, and the queue holds more
    before = sent(admin)
    with pytest.raises(ConfigurationError, match=rf"more than join\(\) reads without names "
                                                 rf"\({JOINED_MOST:,}\); name those"):
        handle.join(timeout=DEADLINE)
    assert sent(admin) - before < MOST_SENT
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
