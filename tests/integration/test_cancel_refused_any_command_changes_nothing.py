"""``cancel()`` by a producer whose ACL user lost one command of cancel.lua since its
check (probe32 H1, M1): Redis refuses a command inside a script as the script comes
to it and keeps the writes made before. A refused HDEL left a delayed task out of
``delayed`` with a Cancelled outcome and its message kept (status ``queued`` for
ever, never run) while ``cancel()`` raised; a refused XADD (the record of recent
outcomes, written last) raised with the task cancelled. Now, for every command the
script may run after its first write, taken away, a cancel of a delayed, a queued,
a grouped (solo, set, group-limited), a limited and a parked task either returns
True and the task is cancelled for good, or raises and leaves the task exactly as it
was: it runs. The commands every cancel runs (ALWAYS) are refused, whatever the
kind; and the user is checked to lack the command (ACL GETUSER; 7.0+: ACL DRYRUN too),
so that neither passes with the command left to it. Redis 7.0 and later are asked
before the first write (``redis.acl_check_cmd``); 6.2 tries each command on the
outcome's list, where it changes nothing, and takes the outcome back when one is
refused. A test-owned redis-server; the worker's part runs in this process."""
from __future__ import annotations

import time
from typing import Any, Callable, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask, TaskFailed
from minitask.broker import acl_check
from minitask.broker.keys import queue_keys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import redis_major, user_without
from tests.support.refused_cancels import DEADLINE, run_until_succeeded
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Every command cancel.lua runs, or may run, after its first write (and a few it
#: runs before it: refused there, nothing is written)
COMMANDS = ("del", "pexpire", "rpush", "zrem", "hdel", "zadd", "incrby", "zincrby", "lrem",
            "srem", "xadd", "hget", "hmget", "zcard", "lpos", "llen", "hexists", "zscore")
KINDS = ("delayed", "queued", "grouped", "grouped_set", "group_limited", "limited", "parked")
#: The commands every cancel asks about (calls() in cancel.lua: the outcome's DEL, RPUSH
#: and PEXPIRE, the message's HDEL), whatever the task's kind: taken away, each is refused
ALWAYS = ("del", "rpush", "pexpire", "hdel")
#: Their other arguments, for ACL DRYRUN (which checks a command's arity first)
DRYRUN = {"del": (), "rpush": ("v",), "pexpire": ("1",), "hdel": ("f",)}
NAME = "cancelany"


def _app(url: str) -> Minitask:
    app = Minitask(NAME, broker=url)

    @app.task(name="add")
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="job", group_by="tenant")
    def job(tenant: str, n: int) -> int:
        return n

    @app.task(name="slot", group_by="tenant", group_max_running=1)
    def slot(tenant: str, n: int) -> int:
        return n

    @app.task(name="limited", max_running=1, rate_limit="100/s")
    def limited(n: int) -> int:
        return n

    return app


def _send(app: Minitask, kind: str) -> Tuple[Any, Any, Callable[[], None]]:
    """The handle of the task to cancel, its expected result, and what lets it run
    (a parked task's running neighbour acknowledged)."""
    tasks = app.tasks
    if kind == "delayed":
        return tasks["add"].apply_in(0.5, 1, 2), 3, lambda: None
    if kind == "queued":
        return tasks["add"].delay(1, 2), 3, lambda: None
    if kind == "grouped":
        return tasks["job"].delay("A", 7), 7, lambda: None
    if kind == "grouped_set":
        tasks["job"].delay("A", 6)
        return tasks["job"].delay("A", 7), 7, lambda: None
    if kind == "group_limited":
        return tasks["slot"].delay("A", 7), 7, lambda: None
    if kind == "limited":
        return tasks["limited"].delay(7), 7, lambda: None
    first, parked = tasks["limited"].delay(6), tasks["limited"].delay(7)
    fetched = app.broker.queues.fetch("default", now_ms=int(time.time() * 1000),
                                      lease_ms=60_000, count=2, max_deliveries=5)
    assert [delivery.task_id for delivery in fetched.deliveries] == [first.id]

    def free() -> None:
        assert app.broker.results.ack("default", first.id, None, 0)
    return parked, 7, free


def _lacks(admin: "redis.Redis[bytes]", command: str, user: str = "limited") -> None:
    """``user`` (user_without's) really may not run ``command``: its rules take it
    away, and (Redis 7.0 and later, which can be asked) ACL DRYRUN refuses it."""
    commands = admin.acl_getuser(user)["commands"]  # e.g. ['-del'] (+@all: a category)
    assert f"-{command}" in commands, f"{user} may still run {command}: {commands}"
    if redis_major(admin) >= 7 and command in DRYRUN:  # (6.2 has no ACL DRYRUN)
        reply = admin.execute_command("ACL", "DRYRUN", user, command, "key", *DRYRUN[command])
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        assert "no permissions" in text, f"{user} may run {command}: {text}"


def _drain(app: Minitask) -> None:
    """Run ``app``'s worker here until nothing is due (a delayed task's time passed)."""
    worker = app.worker()
    deadline = time.monotonic() + DEADLINE
    time.sleep(0.6)
    while worker.run_once():
        assert time.monotonic() < deadline, "the worker never ran out of tasks"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("refused", COMMANDS)
def test_a_cancel_refused_any_command_cancels_all_or_changes_nothing(
        server: RedisServer, admin: "redis.Redis[bytes]", refused: str, kind: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    producer = _app(server.url)
    handle, value, free = _send(producer, kind)
    before = handle.status()
    keys = queue_keys(NAME, "default")
    canceller = _app(user_without(admin, server, refused))
    _lacks(admin, refused)
    # the ACL changed after minitask's own check of it
    monkeypatch.setattr(acl_check, "require_commands", lambda *args: None)
    try:
        try:
            cancelled = canceller.handle(handle.id).cancel()
        except BrokerError as error:
            assert error.reason == "permission", str(error)
            refused_it = True
        else:
            refused_it = False
        # every cancel runs these: taken away, it is refused (the other branch is for
        # a command a kind may not run)
        assert refused_it or refused not in ALWAYS, f"{refused} was not refused"
        if refused_it:
            assert admin.hexists(keys.messages, handle.id), "the task was lost"
            assert not admin.exists(keys.result(handle.id)), "an outcome was left"
            assert handle.status() == before
            free()
            run_until_succeeded(producer, handle, "the task never ran")
            assert handle.get(timeout=5) == value
        else:
            assert cancelled is True
            assert handle.status() == "cancelled"
            assert not admin.hexists(keys.messages, handle.id), "its message was kept"
            free()
            _drain(producer)
            assert handle.status() == "cancelled"
            with pytest.raises(TaskFailed) as caught:
                handle.get(timeout=5)
            assert caught.value.exc_type == "Cancelled"
    finally:
        canceller.close()
        producer.close()
