"""A starting cancel watch reads its queue's ``cancels`` stream from the stream's last
id, which request_cancel.lua reads with XINFO STREAM, not from a second before Redis's
time (a reviewer's finding on issue 29): a new entry's id is max(Redis's clock, the
last id + 1), so with the clock stepped back by more than a second (NTP, a failover
to a replica whose clock is behind) requests got ids below the start and were missed,
and with the last id ahead of the clock old requests were read again. A stream whose
last id is ahead of Redis's time is what a clock stepped back leaves; on a real
redis-server."""
from __future__ import annotations

from typing import Iterator

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.stores.cancels import STREAM_BYTES, STREAM_LENGTH
from minitask.wire.message import MAX_ID_BYTES
from tests.support.acl import documented_acl
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

KEYS = queue_keys("aio", "default")


@pytest.fixture
def app(server: RedisServer) -> Iterator[Minitask]:
    app = Minitask("aio", broker=server.client())
    try:
        yield app
    finally:
        app.close()


def _redis_ms(client: "redis.Redis[bytes]") -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def _last_id(client: "redis.Redis[bytes]") -> str:
    return client.xinfo_stream(KEYS.cancels)["last-generated-id"].decode()


def test_a_stream_ahead_of_the_clock_is_read_from_its_last_id(
        server: RedisServer, app: Minitask) -> None:
    """Its last id 10 s past Redis's time (its clock stepped back since): the watch
    starts at that id, so the old request there is not heard again, and the one
    posted after it is (its id the last + 1)."""
    client = server.client()
    ahead = _redis_ms(client) + 10_000
    client.zadd(KEYS.leases, {"leased": 2 ** 50})
    client.xadd(KEYS.cancels, {b"id": b"leased"}, id=f"{ahead}-0")  # an old request
    store = app.broker.cancels
    positions = store.positions(["default"])
    assert positions == {"default": f"{ahead}-0"}  # before: Redis's time less 1 s
    assert client.xlen(KEYS.cancels) == 1  # nothing written
    assert store.request("default", "leased") is True
    heard = store.watch(positions, timeout=5.0)
    assert [(entry_id, task_id) for _, entry_id, task_id in heard] == [
        (_last_id(client), "leased")]


def test_a_stream_deleted_entries_and_all_is_read_from_its_last_generated_id(
        server: RedisServer, app: Minitask) -> None:
    """Every entry deleted, the stream keeps its last generated id: the watch starts
    there, and hears the next request."""
    client = server.client()
    ahead = _redis_ms(client) + 10_000
    client.zadd(KEYS.leases, {"leased": 2 ** 50})
    client.xadd(KEYS.cancels, {b"id": b"gone"}, id=f"{ahead}-5")
    client.xdel(KEYS.cancels, f"{ahead}-5")
    positions = app.broker.cancels.positions(["default"])
    assert positions == {"default": f"{ahead}-5"}
    assert app.broker.cancels.request("default", "leased") is True
    heard = app.broker.cancels.watch(positions, timeout=5.0)
    assert [task_id for _, _, task_id in heard] == ["leased"]


def test_no_stream_is_read_from_its_start_and_none_is_made(
        server: RedisServer, app: Minitask) -> None:
    client = server.client()
    client.zadd(KEYS.leases, {"leased": 2 ** 50})
    positions = app.broker.cancels.positions(["default"])
    assert positions == {"default": "0-0"}  # any entry comes after it, whatever the clock
    assert client.exists(KEYS.cancels) == 0
    assert app.broker.cancels.request("default", "leased") is True
    heard = app.broker.cancels.watch(positions, timeout=5.0)
    assert [task_id for _, _, task_id in heard] == ["leased"]


def test_a_stream_of_the_longest_ids_is_read_from_its_last_id(
        server: RedisServer, app: Minitask) -> None:
    """As many requests as it keeps and more, each naming an id of MAX_ID_BYTES: no
    bigger than a stream of minitask's can be (``STREAM_BYTES``)."""
    client = server.client()
    pipe = client.pipeline(transaction=False)
    for number in range(3 * STREAM_LENGTH):
        pipe.xadd(KEYS.cancels, {b"id": f"{number:0{MAX_ID_BYTES}d}".encode()},
                  maxlen=STREAM_LENGTH, approximate=True)
    pipe.execute()
    assert client.memory_usage(KEYS.cancels, samples=0) <= STREAM_BYTES
    assert app.broker.cancels.positions(["default"]) == {"default": _last_id(client)}


def test_a_huge_stream_is_not_looked_into(server: RedisServer, app: Minitask) -> None:
    """A stream bigger than minitask's ever are (a 32 MB entry planted a moment ago) is
    not looked into (XINFO STREAM would copy that entry inside Redis, twice, ~0.2 s each
    watch start), nor read from the clock (a start a second before Redis's time would
    send the planted entry): a small wake-up entry is added and the watch starts at its
    id; nothing of the planted entry is sent."""
    client = server.client()
    client.xadd(KEYS.cancels, {b"id": b"x" * (32 << 20)})
    client.config_resetstat()
    sent = client.info("stats")["total_net_output_bytes"]
    positions = app.broker.cancels.positions(["default"])
    assert client.info("stats")["total_net_output_bytes"] - sent < 1 << 20
    assert not any(name.startswith("cmdstat_xinfo") for name in client.info("commandstats"))
    last_id, fields = client.xrevrange(KEYS.cancels, count=1)[0]
    assert fields == {b"wake": b"1"} and positions["default"] == last_id.decode()


def test_without_xinfo_a_watch_reads_from_a_second_before_redis_time(
        server: RedisServer) -> None:
    """An ACL user of the documented list without ``xinfo|stream``: a second before
    Redis's time, as before, still writing nothing."""
    admin = server.client()
    rules = [rule for rule in documented_acl() if rule != "+xinfo|stream"]
    admin.acl_setuser("noxinfo", enabled=True, passwords=["+pw"], reset=True)
    admin.execute_command("ACL", "SETUSER", "noxinfo", *rules)
    user = redis.Redis(host="127.0.0.1", port=server.port, username="noxinfo", password="pw")
    app = Minitask("aio", broker=user)
    try:
        admin.xadd(KEYS.cancels, {b"id": b"long-gone"}, id="1-0")
        before = _redis_ms(admin)
        positions = app.broker.cancels.positions(["default"])
        after = _redis_ms(admin)
        ms, _, seq = positions["default"].partition("-")
        assert before - 1000 <= int(ms) <= after - 1000 and seq == "0"
        assert admin.xlen(KEYS.cancels) == 1
    finally:
        app.close()


def test_a_last_id_past_any_minitask_writes_is_set_aside_by_the_look(
        server: RedisServer, app: Minitask) -> None:
    """Its entry deleted (XDEL), the stream reads empty, yet its last id is the last
    there is: a watch reading from it would hear nothing (every XADD is refused). The
    look sets it aside and the watch reads the new stream from its start."""
    client = server.client()
    last = "18446744073709551615-18446744073709551615"
    client.xadd(KEYS.cancels, {b"planted": b"1"}, id=last)
    client.xdel(KEYS.cancels, last)
    client.zadd(KEYS.leases, {"leased": 2 ** 50})
    positions = app.broker.cancels.positions(["default"])
    assert positions == {"default": "0-0"}
    assert client.xinfo_stream(KEYS.cancels_aside)["last-generated-id"] == last.encode()
    assert app.broker.cancels.request("default", "leased") is True
    heard = app.broker.cancels.watch(positions, timeout=5.0)
    assert [task_id for _, _, task_id in heard] == ["leased"]
