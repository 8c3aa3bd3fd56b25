"""A producer lists its queues again after the app's registry is lost (probe 29k, M2); an
enqueue whose reply the connection lost says the task may have been enqueued and names
it (M3); an ACL without MULTI/EXEC never has a plain delay() write outside a
transaction (L1). On a real redis-server; the lost reply through a cutting proxy."""
from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, List, Set, Tuple

import pytest
import redis

from minitask import Minitask, TaskHandle
from minitask.broker.keys import AppKeys, QueueKeys
from minitask.errors import BrokerError
from tests.support.acl import documented_acl
from tests.support.cutting import CuttingProxy
from tests.support.paths import ROOT
from tests.support.servers import RedisServer

APP = "lostreg"
#: stores/queue.py's REGISTER_AGAIN: a write registers its queue again this long after
AGAIN = 1.0
MODULE = f"""
from minitask import Minitask, TaskHandle
app = Minitask({APP!r}, broker={{url!r}})

@app.task(name="rec")
def rec(tag):
    return tag
"""


@pytest.fixture
def made(admin: "redis.Redis[bytes]", redis_server: RedisServer,
         tmp_path: Path) -> Iterator[Tuple[Minitask, Path]]:
    """The app of a module in ``tmp_path`` (for the CLI), and that directory."""
    (tmp_path / "lostapp.py").write_text(MODULE.format(url=redis_server.url))
    sys.path.insert(0, str(tmp_path))
    try:
        import lostapp  # type: ignore[import-not-found]
        yield lostapp.app, tmp_path
        lostapp.app.close()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lostapp", None)


def _cli(where: Path, *argv: str) -> Tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(where), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "minitask", argv[0], "-A", "lostapp:app",
                           *argv[1:]], cwd=where, env=env, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, done.stdout + done.stderr


def _registry(admin: "redis.Redis[bytes]") -> Set[bytes]:
    return admin.smembers(AppKeys(APP).queues)


def test_a_flushed_registry_lists_the_queue_again_at_the_next_plain_send(
        made: Tuple[Minitask, Path], admin: "redis.Redis[bytes]") -> None:
    """A restart without persistence (FLUSHALL here) at once after a send: the next plain
    send into a queue no task declares lists it again, and the CLI finds its task."""
    app, where = made
    rec = app.tasks["rec"]
    rec.apply_async(("a",), queue="dyn")
    rec.apply_async(("a2",), queue="dyn")  # the plain path (MULTI/EXEC) from now on
    admin.flushall()
    handle = rec.apply_async(("b",), queue="dyn")
    assert b"dyn" in _registry(admin)
    code, out = _cli(where, "inspect", handle.id)
    assert code == 0 and "unknown" not in out and "dyn" in out, out
    code, out = _cli(where, "status")
    assert code == 0 and "dyn" in out, out
    code, out = _cli(where, "purge", "dyn", "--yes")
    assert code == 0 and "no queue" not in out, out
    assert handle.status() == "unknown"  # purged


def test_a_deleted_registry_lists_a_queue_holding_tasks_again_a_second_on(
        made: Tuple[Minitask, Path], admin: "redis.Redis[bytes]") -> None:
    """The registry key deleted alone, the queue's tasks kept: the next plain send and
    the next delay_many() a second or more after the last registration list it again."""
    app, _ = made
    rec = app.tasks["rec"]
    for queue in ("dyn", "dyn2"):
        rec.apply_async(("a",), queue=queue)
        rec.apply_async(("b",), queue=queue)
    admin.delete(AppKeys(APP).queues)
    time.sleep(AGAIN + 0.05)
    handle = rec.apply_async(("c",), queue="dyn")  # found the list not empty
    rec.apply_async(("d",), queue="dyn2", delay=60)  # enqueue.lua
    assert _registry(admin) == {b"dyn", b"dyn2"}
    assert app.handle(handle.id).status() == "queued"


# (RESP3 is refused at the first send now: test_worker_start_refuses_resp3_and_says_tls_failed)
@pytest.mark.parametrize("protocol", [2])
def test_a_lost_enqueue_reply_says_the_task_may_be_enqueued_and_names_it(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", protocol: int) -> None:
    proxy = CuttingProxy(redis_server)
    app = Minitask(APP, broker=f"{proxy.url}?protocol={protocol}")
    rec = app.task(name="rec")(lambda tag: tag)
    try:
        rec.delay("warm")
        rec.delay("warm")  # the plain path from now on
        handles: List[TaskHandle[Any]] = []

        def lost(send: object, marker: str) -> BrokerError:
            proxy.cut_reply_to(marker.encode())
            with pytest.raises(BrokerError) as caught:
                send()  # type: ignore[operator]
            return caught.value

        cases: List[Tuple[str, BrokerError]] = [
            ("delay", lost(lambda: rec.delay("cut-x"), "cut-x")),
            ("task_id", lost(lambda: rec.apply_async(("cut-y",), task_id="given-1"), "cut-y")),
            ("later", lost(lambda: rec.apply_async(("cut-z",), delay=30), "cut-z")),
            ("many", lost(lambda: rec.delay_many([("cut-m1",), ("cut-m2",)]), "cut-m2")),
            ("adelay", lost(lambda: asyncio.run(_closing(app, rec.adelay("cut-a"))), "cut-a")),
            ("batch", lost(lambda: _batch(app, rec, handles), "cut-b2")),
            ("durable", lost(lambda: rec.apply_async(("cut-d",), durability="replicated"),
                             "cut-d")),
            ("adurable", lost(lambda: asyncio.run(_closing(app, rec.aapply_async(
                ("cut-e",), durability="replicated"))), "cut-e")),
        ]
        assert proxy.cuts == len(cases)
        messages = QueueKeys(APP, "default").messages
        for label, error in cases:
            text = str(error)
            assert error.sent and error.reason == "unreachable", (label, text)
            assert error.task_ids and error.task_id == error.task_ids[0], label
            assert "may have been made" in text and "nothing" not in text, (label, text)
            assert f"app.handle({error.task_id!r}).status()" in text, (label, text)
            assert f"task_id={error.task_id!r}" in text, (label, text)
            for task_id in error.task_ids:  # it was written: Redis ran the command
                assert admin.hexists(messages, task_id) or admin.zscore(
                    QueueKeys(APP, "default").delayed, task_id) is not None, label
            assert app.handle(error.task_id).status() in ("queued", "scheduled"), label
        assert dict(cases)["task_id"].task_id == "given-1"
        assert len(dict(cases)["many"].task_ids) == 2
        assert dict(cases)["batch"].task_ids == [h.id for h in handles]
        assert [h.status() for h in handles] == ["queued", "queued"]  # no BatchNotSent
        # sent again with its id: never enqueued twice
        again = rec.apply_async(("cut-x",), task_id=dict(cases)["delay"].task_id)
        assert again.id == dict(cases)["delay"].task_id
        assert admin.hlen(messages) == 2 + 10  # the two warm-ups, the ten cut: no more
    finally:
        app.close()
        proxy.close()


async def _closing(app: Minitask, send: Any) -> Any:
    """``send`` awaited, then the loop's connections closed (a lost reply's queue is
    registered on a connection of its own: left open, the closed loop warns of it)."""
    try:
        return await send
    finally:
        await app.aclose()


def _batch(app: Minitask, rec: Any, handles: List[TaskHandle[Any]]) -> None:
    with app.batch():
        handles += [rec.delay("cut-b1"), rec.delay("cut-b2")]


def test_a_failed_write_still_says_nothing_was_enqueued(admin: "redis.Redis[bytes]",
                                                        redis_server: RedisServer) -> None:
    """No server where the broker points: the write fails, nothing reached Redis."""
    proxy = CuttingProxy(redis_server)
    url = proxy.url
    proxy.close()
    app = Minitask(APP, broker=url)
    rec = app.task(name="rec")(lambda tag: tag)
    try:
        with pytest.raises(BrokerError) as caught:
            rec.delay("x")
        assert not caught.value.sent and caught.value.task_id is None
        assert str(caught.value).startswith("could not enqueue")
    finally:
        app.close()


def test_an_acl_without_multi_exec_never_writes_outside_a_transaction(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    rules = [rule for rule in documented_acl() if rule not in ("+multi", "+exec")]
    admin.acl_setuser("nomulti", enabled=True, passwords=["+pw"], reset=True)
    admin.execute_command("ACL", "SETUSER", "nomulti", *rules)
    app = Minitask(APP, broker=f"redis://nomulti:pw@127.0.0.1:{redis_server.port}/0")
    rec = app.task(name="rec")(lambda tag: tag)
    q = QueueKeys(APP, "default")
    try:
        with caplog.at_level(logging.WARNING, logger="minitask"):
            ids = [rec.delay(f"x{n}").id for n in range(4)]
        assert admin.hlen(q.messages) == 4
        assert admin.lrange(q.ready[4], 0, -1) == [i.encode() for i in ids]
        assert admin.llen(q.wake) == 4  # one token each: no write made twice
        said = [r.getMessage() for r in caplog.records if "MULTI/EXEC" in r.getMessage()]
        assert len(said) == 1 and "+multi +exec" in said[0], said
    finally:
        app.close()
        admin.acl_deluser("nomulti")


def test_the_workflow_durability_error_says_the_failover_once() -> None:
    from minitask.broker.durability import Durability, name_workflow
    from minitask.errors import DurabilityError
    with pytest.raises(DurabilityError) as caught:
        Durability("replicated").check(0, "send a chain", "here")
    text = str(name_workflow(caught.value, "chain", "c1"))
    assert text.count("failover") == 1 and "runs, but" in text, text
