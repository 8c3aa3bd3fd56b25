"""The plain delay()'s MULTI/EXEC check (review 29f): an ACL without +multi is asked
about once, not at every call with a reconnect (M4); a queue-time refusal inside
MULTI/EXEC (OOM, an ACL without SADD) is EXECABORT, not a refusal of MULTI/EXEC: no
"grant +multi +exec" warning, and the plain path stays on (M5). On a real
redis-server."""
from __future__ import annotations

import logging
from typing import Any, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from minitask.stores.plain import PlainPush
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.fixture
def user(admin: "redis.Redis[bytes]") -> Iterator[str]:
    admin.execute_command("ACL", "SETUSER", "plainuser", "on", ">pw", "~*", "&*", "+@all")
    try:
        yield "plainuser"
    finally:
        admin.execute_command("ACL", "DELUSER", "plainuser")
        admin.config_set("maxmemory", 0)


def _app(redis_server: RedisServer, name: str) -> Minitask:
    app = Minitask(name, broker=f"redis://plainuser:pw@127.0.0.1:{redis_server.port}/0")

    @app.task(name="t")
    def t(value: int) -> int:
        return value

    return app


def test_an_acl_without_multi_is_asked_once_not_at_every_call(
        admin: "redis.Redis[bytes]", redis_server: RedisServer, user: str) -> None:
    app = _app(redis_server, "multionce")
    try:
        t = app.tasks["t"]
        t.delay(0)  # the queue registered by the script
        admin.execute_command("ACL", "SETUSER", user, "-multi")
        t.delay(1)  # asks: refused, said once
        before = admin.info("stats")["total_connections_received"]
        asked = admin.info("commandstats").get("cmdstat_multi", {}).get("rejected_calls", 0)
        for value in range(2, 42):
            t.delay(value)
        assert admin.info("stats")["total_connections_received"] - before <= 1
        assert admin.info("commandstats").get("cmdstat_multi", {}).get(
            "rejected_calls", 0) == asked
        assert admin.llen("minitask:{multionce:default}:ready:5") == 42
    finally:
        app.close()


@pytest.mark.parametrize("refusal", ["oom", "-sadd"])
def test_a_refusal_queued_inside_multi_keeps_the_plain_path_and_warns_nothing(
        admin: "redis.Redis[bytes]", redis_server: RedisServer, user: str, refusal: str,
        caplog: pytest.LogCaptureFixture) -> None:
    app = _app(redis_server, "execabort")
    try:
        t = app.tasks["t"]
        t.delay(0)
        t.delay(1)  # the plain path from now on (MULTI/EXEC asked: granted)
        plain = app.broker.queues.push.__self__  # type: ignore[attr-defined]
        assert plain._usable is True
        if refusal == "oom":
            admin.config_set("maxmemory", 1)
            admin.config_set("maxmemory-policy", "noeviction")
        else:
            admin.execute_command("ACL", "SETUSER", user, "-sadd")
            plain.known["default"] = -1e9  # the write registers its queue again: SADD
        with caplog.at_level(logging.WARNING):
            with pytest.raises(BrokerError) as refused:
                t.delay(2)
        assert "MULTI/EXEC" not in caplog.text
        ready = admin.lrange("minitask:{execabort:default}:ready:5", 0, -1)
        if refusal == "-sadd":  # the script enqueued it, then SADD was refused: said sent
            assert refused.value.sent and refused.value.task_id is not None, str(refused.value)
            assert refused.value.task_id.encode() in ready
        else:
            assert not refused.value.sent and len(ready) == 2
        assert plain._usable is True
    finally:
        app.close()


def test_a_wake_list_of_another_type_keeps_the_plain_write_and_is_moved_aside_next(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """EXEC ran the HSET and the RPUSH of the id: a polling worker may hold the task
    already, so nothing of it is taken back (it was HDELed, and enqueue.lua wrote it
    again: run twice); the next write goes by enqueue.lua, which moves the list aside."""
    app = Minitask("wakeplain", broker=redis_server.url)

    @app.task(name="t")
    def t(value: int) -> int:
        return value

    k = QueueKeys("wakeplain", "default")
    try:
        t.delay(0)
        t.delay(1)  # the plain path from now on
        admin.delete(k.wake, k.ready[4])  # (the tasks before: run, say)
        admin.set(k.wake, "planted")
        taken: List[bytes] = []
        take_back = PlainPush._take_back

        def fetched_first(self: PlainPush, *args: Any) -> None:
            taken.append(admin.lpop(k.ready[4]) or b"")  # a polling worker's, in between
            take_back(self, *args)

        monkeypatch.setattr(PlainPush, "_take_back", fetched_first)
        handle = t.delay(2)  # the write stands: no error, its task once, with its message
        monkeypatch.undo()
        held = taken + admin.lrange(k.ready[4], 0, -1)
        assert held.count(handle.id.encode()) == 1  # handed out once, never twice
        assert admin.hexists(k.messages, handle.id)
        after = t.delay(3)  # by enqueue.lua: the foreign list moved aside, a token pushed
        assert admin.get(k.wake + ":foreign") == b"planted"
        assert admin.type(k.wake) == b"list"
        assert [h.status() for h in (handle, after)] == ["queued", "queued"]
        assert len(taken) + admin.llen(k.ready[4]) == 2
    finally:
        app.close()
