"""A send by an ACL user missing a command minitask's sending scripts call is refused
before anything is written, naming the command; sent again once the ACL allows it, it
runs (issue 29: a delayed task by a user without DEL was stored, then refused before
its ZADD: in no queue, 'queued' for ever, and a resend with its task_id= did nothing).

Each sending path: a delay in seconds, an eta, a plain delay(), a grouped delay (fair
queues), delay_many(), an app.batch() block, a chain, a group, a chord, a broadcast,
adelay(). An ACL changed after the check: the refusal part way says what it left (a
task it had not finished not pending) and that a resend with the same task_id= once the
ACL allows it queues that task once, which it does; the next send is checked again. On
Redis 6.2 (no redis.acl_check_cmd) the refusal part way is said the same way.

On test-owned redis-servers with ACL users; a real worker process runs what was sent.
"""
from __future__ import annotations

import asyncio
import datetime
from typing import Any, Callable, Dict, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask, chain, chord, group
from minitask.broker.keys import AppKeys, QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import has_acl_check, user_without
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "aclsends"  # tests/apps/acl_sends.py: the worker's
USER = "sender"


def _app(url: str) -> Tuple[Minitask, Any, Any, Any]:
    app = Minitask(APP, broker=url)

    @app.task(name="add")
    def add(x: int, y: int = 0) -> int:
        return x + y

    @app.task(name="other", queue="other")
    def other(x: Any) -> Any:
        return x

    @app.task(name="tick", broadcast=True, queue="ticks")
    def tick(n: int) -> int:
        return n
    return app, add, other, tick


def _arun(app: Minitask, send: Callable[[], Any]) -> Any:
    async def run() -> Any:
        try:
            return await send()
        finally:
            await app.aclose()
    return asyncio.run(run())


def _sends(app: Minitask, add: Any, other: Any, tick: Any) -> Dict[str, Callable[[], Any]]:
    """Each sending path, with fixed ids where the call takes one (sent again: the same)."""
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=60)

    def batch() -> None:
        with app.batch():
            add.apply_async((1,), task_id="b-1")
            add.apply_async((2,), task_id="b-2", delay=60)
            other.apply_async((3,), task_id="b-3")
    return {
        "delay in seconds": lambda: add.apply_async((1,), task_id="d-1", delay=60),
        "eta": lambda: add.apply_async((1,), task_id="e-1", eta=later),
        "plain delay": lambda: add.apply_async((1,), task_id="p-1"),
        "grouped delay": lambda: add.apply_async((1,), task_id="g-1", group="acme",
                                                 delay=60),
        "grouped now": lambda: add.apply_async((1,), task_id="g-2", group="acme"),
        "delay_many": lambda: add.delay_many([(1,), (2,)]),
        "batch": batch,
        "chain": lambda: chain(add.s(1, 2), add.s(3)).delay(),
        "chain with a later step's id": lambda: chain(
            add.s(1, 2), add.s(3).set(task_id="later-1")).delay(),
        "chord with its body's id": lambda: chord(
            [add.s(1, 2)], other.s().set(task_id="body-1")).delay(),
        "group": lambda: group(add.s(1, 2), other.s(3)).delay(),
        "chord": lambda: chord([add.s(1, 2), add.s(3)], other.s()).delay(),
        "broadcast": lambda: tick.delay(1),
        "adelay": lambda: _arun(app, lambda: add.adelay(1)),
        "aapply_async in seconds": lambda: _arun(
            app, lambda: add.aapply_async((1,), task_id="ad-1", delay=60)),
        "apply_in": lambda: add.apply_in(60, 1),
    }


def _snapshot(admin: "redis.Redis[bytes]") -> Dict[bytes, Any]:
    """Every key and its whole value (DUMP): what a send refused whole must not change,
    but the app's registry of queues (a workflow lists its queues before its steps)."""
    return {key: admin.dump(key) for key in sorted(admin.keys("*"))
            if key != AppKeys(APP).queues.encode()}


PATHS = list(_sends(*_app("redis://127.0.0.1:1/0")).keys())


@pytest.mark.parametrize("missing", ["del", "zadd"])
@pytest.mark.parametrize("path", PATHS)
def test_a_send_by_a_user_missing_a_command_is_refused_before_any_write(
        server: RedisServer, admin: "redis.Redis[bytes]", path: str, missing: str) -> None:
    app, add, other, tick = _app(user_without(admin, server, missing, user=USER))
    try:
        if not has_acl_check(admin):  # 6.2 cannot be asked: a refusal part way, told so
            try:
                _sends(app, add, other, tick)[path]()  # (a path without the command: sent)
            except BrokerError as error:
                said = str(error)
                assert error.reason == "permission", said
                if error.sent:  # (else refused at its first write: nothing written)
                    assert error.part_way and (
                        "send it again with the same task_id=" in said
                        and "under a new task id" not in said
                        or "one it had not finished is left unsent" in said  # (workflow)
                        or "finds it logged and sends nothing" in said), said  # (broadcast)
            return
        before = _snapshot(admin)
        with pytest.raises(BrokerError) as refused:
            _sends(app, add, other, tick)[path]()
        error, said = refused.value, str(refused.value)
        assert error.reason == "permission" and not error.sent and not error.part_way, said
        assert f"+{missing}" in said and missing.upper() in said, said
        assert "no task was written" in said, said
        assert _snapshot(admin) == before, said  # nothing half-written
        admin.execute_command("ACL", "SETUSER", USER, f"+{missing}")  # the ACL fixed
        _sends(app, add, other, tick)[path]()  # sent again: goes through
    finally:
        app.close()


def test_a_delayed_task_refused_for_want_of_del_runs_once_the_acl_allows_it(
        server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes) -> None:
    """The issue's case end to end: before, the task was stored in no queue and the
    resend with its task_id= found it stored, so it never ran."""
    app, add, _, _ = _app(user_without(admin, server, "del", user=USER))
    worker = processes.worker("tests.apps.acl_sends", "--pool", "thread", "-c", "1",
                              env={"MINITASK_BROKER_URL": server.url})
    try:
        with pytest.raises(BrokerError) as refused:
            add.apply_async((2, 3), task_id="late-1", delay=1)
        said = str(refused.value)
        if has_acl_check(admin):
            assert not refused.value.sent and "+del" in said, said
        else:  # 6.2: refused part way, the task not pending, and the resend by id said
            assert refused.value.part_way and "send it again with the same task_id=" \
                in said and "under a new task id" not in said, said
            assert not admin.hexists(QueueKeys(APP, "default").messages, "late-1")
        admin.execute_command("ACL", "SETUSER", USER, "+del")
        handle = add.apply_async((2, 3), task_id="late-1", delay=1)  # as the error says
        assert handle.get(timeout=30) == 5  # (6.2 too: the same id queued, and it ran)
        assert admin.hlen(QueueKeys(APP, "default").messages) == 0  # acked: none left
        assert not _delayed(admin, "late-1")  # nothing left to run it again
    finally:
        app.close()
        assert worker.poll() is None, "the worker stopped"


def _delayed(admin: "redis.Redis[bytes]", task_id: str) -> bool:
    return admin.zscore(QueueKeys(APP, "default").delayed, task_id) is not None


def test_an_acl_changed_after_the_check_is_told_true_and_checked_again(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """DEL taken away after the first send passed the check (or on 6.2, which cannot
    be asked): the delayed task is left not pending (its message, written last, not
    written), and the error says so and that a resend with its task_id= mends it; the
    next send is checked again and refused whole; sent again with the same id once the
    ACL is back, the task is queued once."""
    app, add, _, _ = _app(user_without(admin, server, user=USER))
    try:
        add.apply_async((0,), task_id="warm-1", delay=60)
        assert _delayed(admin, "warm-1")
        admin.execute_command("ACL", "SETUSER", USER, "-del")
        with pytest.raises(BrokerError) as refused:
            add.apply_async((1,), task_id="part-1", delay=60)
        error, said = refused.value, str(refused.value)
        assert error.sent and error.part_way and error.task_ids == ["part-1"], said
        assert "left not pending" in said and "send it again with the same task_id=" \
            in said and "queues each task it had not finished once" in said, said
        assert "under a new task id" not in said and "queues nothing" not in said, said
        # what it says is so: its message (which makes it pending) not written
        messages = QueueKeys(APP, "default").messages
        assert not admin.hexists(messages, "part-1")
        if has_acl_check(admin):  # (6.2: nothing to check again with)
            before = _snapshot(admin)
            with pytest.raises(BrokerError) as again:
                add.apply_async((2,), task_id="next-1", delay=60)
            assert not again.value.sent and "+del" in str(again.value), str(again.value)
            assert _snapshot(admin) == before  # checked again: refused before any write
        admin.execute_command("ACL", "SETUSER", USER, "+del")
        add.apply_async((2,), task_id="next-1", delay=60)
        assert _delayed(admin, "next-1")
        # the same id sent again, as the error says: queued, once (sent a third time,
        # it is left as it is)
        for _ in range(2):
            add.apply_async((1,), task_id="part-1", delay=60)
        assert admin.hexists(messages, "part-1") and _delayed(admin, "part-1")
        assert app.handle("part-1").status() == "scheduled"
        assert admin.hlen(messages) == 3 and admin.zcard(QueueKeys(APP, "default").delayed) \
            == 3  # warm-1, next-1, part-1: one entry each
    finally:
        app.close()


def test_a_batch_refused_part_way_after_the_check_gives_the_resend_by_id(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, add, other, _ = _app(user_without(admin, server, user=USER))
    try:
        other.delay(0)  # the check passes
        admin.execute_command("ACL", "SETUSER", USER, "-del")
        with pytest.raises(BrokerError) as refused:
            with app.batch():
                add.apply_async((1,), task_id="bp-1", delay=60)
        error, said = refused.value, str(refused.value)
        assert error.sent and error.part_way, said
        assert "is queued once" in said and "they never run twice" in said, said
        assert "does not mend" not in said, said
        messages = QueueKeys(APP, "default").messages
        assert not admin.hexists(messages, "bp-1")  # left not pending, as said
        admin.execute_command("ACL", "SETUSER", USER, "+del")
        for _ in range(2):  # sent again with its task_id=: queued once
            with app.batch():
                add.apply_async((1,), task_id="bp-1", delay=60)
        assert admin.hexists(messages, "bp-1") and _delayed(admin, "bp-1")
        assert admin.hlen(messages) == 1 and admin.zcard(QueueKeys(APP, "default").delayed) == 1
    finally:
        app.close()
