"""``minitask shutdown --all`` past a worker whose orders list holds another type, on a
real redis-server (issue 29, probe 17: M3).

It stopped at the first such worker: exit 3 with that worker's error only, the live
workers after it got no order, and those before it were stopped without a word.
Every worker it can reach is now asked (and said), each refused one is named with
its key, and the exit status is 3 only then.
"""
from __future__ import annotations

import time
from typing import Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.admin import shutdown
from minitask.broker.keys import AppKeys
from minitask.cli import shutdown as shutdown_command
from minitask.cli.main import main
from minitask.errors import BrokerError
from tests.support.cli import operate_with
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

KEYS = AppKeys("m3")
#: The registry lists the longest silent first: evilB between the live ones.
WORKERS = ["good1", "evilB", "good2", "good3"]


@pytest.fixture
def app(redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    made = Minitask("m3", broker=redis_server.client())
    operate_with(made, monkeypatch, shutdown_command)
    now_ms = int(time.time() * 1000)
    for age, name in enumerate(reversed(WORKERS)):
        beat = now_ms - 1000 * (age + 1)
        admin.zadd(KEYS.workers, {name: beat})
        admin.hset(KEYS.worker(name), mapping={"name": name, "beat_ms": beat})
    admin.set(KEYS.control("evilB"), "junk")
    try:
        yield made
    finally:
        monkeypatch.undo()
        made.close()


def _ordered(admin: "redis.Redis[bytes]") -> List[str]:
    return [name for name in WORKERS if name != "evilB"
            and admin.lrange(KEYS.control(name), 0, -1) == [b"shutdown"]]


def test_the_cli_asks_every_other_worker_and_names_the_refused_key(
        app: Minitask, admin: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["shutdown", "-A", "m3", "--all", "--yes"])
    out, err = capsys.readouterr()
    assert code == 3, (out, err)
    assert _ordered(admin) == ["good1", "good2", "good3"]
    assert all(f"asked worker {name} to stop" in out for name in ("good1", "good2", "good3"))
    assert KEYS.control("evilB") in err and "evilB" not in out, (out, err)
    assert admin.get(KEYS.control("evilB")) == b"junk"  # left as it was


def test_the_function_raises_after_asking_the_others_saying_who(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    with pytest.raises(BrokerError) as raised:
        shutdown(app, every=True)
    assert raised.value.reason == "wrong type"
    assert KEYS.control("evilB") in str(raised.value)
    assert all(name in str(raised.value) for name in ("good1", "good2", "good3"))
    assert _ordered(admin) == ["good1", "good2", "good3"]
