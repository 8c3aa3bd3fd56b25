"""A send told the truth about what it wrote when Redis failed or refused part way (probe
29n): a workflow whose queue registry was refused after its steps were written (H1: was
"could not", sent=False, its reservations released); a WAIT refused behind an enqueue
(H3a: was "could not enqueue", the task ready); a command refused inside a writing
script (H3b: enqueue_now.lua writes, then an ACL refuses DEL: was sent=False); a registry
of another type failing every asyncio send (M1); a lost reply of a workflow's checks
or id reservations, which write nothing, said "maybe" (L2); a workflow's lost reply
releasing the ids of steps that may be in Redis (L3); an enqueue written for certain
said "maybe" with ``enqueued_ids`` empty (L4).

On test-owned redis-servers (ACL users, a planted registry); a lost reply through a
cutting proxy that drops the reply of the write carrying a script's sha.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any, Awaitable, Callable, Iterator, List, Tuple

import pytest
import redis

from minitask import BrokerError, ConfigurationError, DurabilityError, Minitask, chain, chord, group
from minitask.broker.keys import AppKeys, QueueKeys
from minitask.stores.scripts import source
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import allowed_only_for_the_check, refused_app, user_without
from tests.support.cutting import CuttingProxy
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "afterw"


def _arun(app: Minitask, send: Callable[[], Awaitable[Any]]) -> Any:
    """``send()`` awaited on a loop of its own, the app's async connections closed after."""
    async def run() -> Any:
        try:
            return await send()
        finally:
            await app.aclose()
    return asyncio.run(run())


def _sha(script: str) -> bytes:
    return hashlib.sha1(source(script).encode()).hexdigest().encode()


def _messages(admin: "redis.Redis[bytes]", queue: str = "default") -> List[bytes]:
    return admin.hkeys(QueueKeys(APP, queue).messages)


def _reserved(admin: "redis.Redis[bytes]", task_id: str, queue: str = "default") -> bool:
    return admin.hexists(QueueKeys(APP, queue).once(task_id), "w")


def _workflow(kind: str, add: Any, other: Any) -> Any:
    if kind == "chain":
        return chain(add.s(1, 2), add.s(3).set(task_id="later-1"))
    if kind == "group":
        return group(add.s(1, 2), other.s(3))
    return chord([add.s(1, 2)], other.s().set(task_id="later-1"))


# -- H1, L4: the registry refused after the write ---------------------------------------


@pytest.mark.parametrize("kind", ["chain", "group", "chord"])
def test_a_workflow_whose_registry_is_refused_after_the_write_says_it_was_written(
        server: RedisServer, admin: "redis.Redis[bytes]", kind: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    allowed_only_for_the_check(monkeypatch, admin, "limited", "sadd")
    app, add, other = refused_app(APP, user_without(admin, server, "sadd"))
    try:
        with pytest.raises(BrokerError) as caught:
            _workflow(kind, add, other).delay()
        error, text = caught.value, str(caught.value)
        assert error.sent and error.reason == "permission", text
        assert "was written to Redis and runs" in text and "could not register" in text, text
        assert error.task_id is not None and admin.exists(
            QueueKeys(APP, "default").handle(error.task_id)), text  # the handle's id
        assert len(error.task_ids) == 2, text  # the steps
        written = _messages(admin) + _messages(admin, "other")
        assert error.task_ids[0].encode() in written, text
        if kind != "group":  # the later step's id stays the workflow's
            assert error.task_ids[1] == "later-1" and _reserved(
                admin, "later-1", "other" if kind == "chord" else "default"), text
    finally:
        app.close()


def test_an_enqueue_whose_registry_is_refused_after_the_write_names_it_enqueued(
        server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    allowed_only_for_the_check(monkeypatch, admin, "limited", "sadd")
    app, add, _ = refused_app(APP, user_without(admin, server, "sadd"))
    try:
        errors: List[BrokerError] = []
        for send in (lambda: add.delay(1), lambda: add.delay_many([(1,), (2,), (3,)]),
                     lambda: add.apply_async((1,), task_id="given-1"),
                     lambda: _arun(app, lambda: add.adelay(4))):
            app.broker.queues._known_queues.clear()  # each registers its queue again
            with pytest.raises(BrokerError) as caught:
                send()
            errors.append(caught.value)
        for error in errors:
            text = str(error)
            assert error.sent and error.task_ids and error.enqueued_ids == error.task_ids, text
            assert "was made" in text and "may have been" not in text, text
            assert {i.encode() for i in error.enqueued_ids} <= set(_messages(admin)), text
        assert len(errors[1].enqueued_ids) == 3 and errors[2].enqueued_ids == ["given-1"]
    finally:
        app.close()


# -- H3: refused after the write -----------------------------------------------------------


def test_a_wait_refused_after_the_write_says_it_was_made_unconfirmed(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, add, _ = refused_app(APP, user_without(admin, server, "wait"),
                              durability="replicated", durability_timeout=0.2)
    try:
        errors: List[BrokerError] = []
        for send in (lambda: add.delay(1), lambda: add.delay_many([(1,), (2,)]),
                     lambda: _arun(app, lambda: add.adelay(3)),
                     lambda: chain(add.s(1), add.s()).delay()):
            with pytest.raises(BrokerError) as caught:
                send()
            errors.append(caught.value)
        for error in errors:
            text = str(error)
            assert isinstance(error, DurabilityError) and error.sent, text
            assert "refused the WAIT" in text and "could not be checked" in text, text
            assert "+wait" in text, text
        ids = [i for error in errors[:3] for i in error.task_ids]
        assert len(ids) == 4 and {i.encode() for i in ids} <= set(_messages(admin))
        assert admin.exists(QueueKeys(APP, "default").handle(errors[3].task_id or "?"))
    finally:
        app.close()


@pytest.mark.parametrize("command,kind", [("del", "delay"), ("del", "adelay"),
                                          ("del", "many"), ("zadd", "group")])
def test_a_command_refused_inside_a_writing_script_says_it_may_be_written(
        server: RedisServer, admin: "redis.Redis[bytes]", command: str, kind: str) -> None:
    # the ACL check of the first send passes; the command is taken away after it (an ACL
    # changed at run time: the check before a send refuses a user without it from the start)
    app, add, other = refused_app(APP, user_without(admin, server, "nothing"))

    def revoke() -> None:
        admin.execute_command("ACL", "SETUSER", "limited", f"-{command}")

    async def twice() -> Any:
        await other.adelay(0)  # (another queue: a plain delay() into one known goes by MULTI)
        revoke()
        return await add.adelay(1)
    sends = {"delay": lambda: add.delay(1), "adelay": lambda: _arun(app, twice),
             "many": lambda: add.delay_many([(1,), (2,)]),
             # (a step due later refused after one sent: spawn.lua writes the handle
             # record first, and a SET refused there writes no step)
             "group": lambda: group(add.s(1), add.s(2).set(delay=60)).delay()}
    try:
        if kind != "adelay":
            other.delay(0)
            revoke()
        with pytest.raises(BrokerError) as caught:
            sends[kind]()
        error, text = caught.value, str(caught.value)
        assert error.sent and error.reason == "permission" and error.task_ids, text
        assert "may have been" in text and "part way through the script" in text, text
        # a task it had not finished left not pending: the resend by id said (issue 29);
        # a workflow's step unsent, the workflow's check before a resend said
        assert error.part_way and ("send it again with the same task_id=" in text
                                   if kind != "group" else
                                   "one it had not finished is left unsent" in text
                                   and "check first with" in text), text
        assert "queues nothing" not in text and "under a new task id" not in text, text
        assert error.task_ids[0].encode() in _messages(admin), text  # written before it
    finally:
        app.close()


# -- M1: a registry of another type --------------------------------------------------------


def test_async_sends_tolerate_a_registry_of_another_type(
        server: RedisServer, admin: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    app, add, _ = refused_app(APP, server.url)
    registry = AppKeys(APP).queues
    admin.set(registry, "planted")
    try:
        async def sends() -> List[str]:
            one = await add.adelay(1)
            many = await add.adelay_many([(2,), (3,)])
            again = await add.adelay(4)
            return [one.id, *(h.id for h in many), again.id]
        with caplog.at_level(logging.WARNING, logger="minitask"):
            ids = _arun(app, sends)
        assert {i.encode() for i in ids} <= set(_messages(admin))
        assert admin.get(registry) == b"planted"  # left as it is
        said = [r.getMessage() for r in caplog.records if registry in r.getMessage()]
        assert said and "another type" in said[0], said
    finally:
        app.close()


# -- L2, L3: lost replies of a workflow's start --------------------------------------------


@pytest.fixture
def proxied(server: RedisServer) -> Iterator[Tuple[CuttingProxy, Minitask, Any, Any]]:
    proxy = CuttingProxy(server)
    app, add, other = refused_app(APP, proxy.url)
    try:
        yield proxy, app, add, other
    finally:
        app.close()
        proxy.close()


def _lost(proxy: CuttingProxy, script: str, send: Callable[[], Any]) -> BrokerError:
    before = proxy.cuts
    proxy.cut_reply_to(_sha(script))
    with pytest.raises(BrokerError) as caught:
        send()
    assert proxy.cuts == before + 1, str(caught.value)
    return caught.value


def test_a_lost_reply_of_a_workflow_check_says_nothing_was_written(
        proxied: Tuple[CuttingProxy, Minitask, Any, Any], admin: "redis.Redis[bytes]") -> None:
    proxy, _, add, other = proxied
    group(add.s(0), other.s(0)).delay()  # warm: every script loaded
    admin.flushall()
    error = _lost(proxy, "spawn_check", lambda: group(add.s(1), other.s(2)).delay())
    text = str(error)
    assert not error.sent and not error.task_ids, text
    assert "nothing of the workflow was written" in text, text
    assert not _messages(admin) and not _messages(admin, "other"), text
    group(add.s(1), other.s(2)).delay()  # sent again: nothing stands in its way


def test_a_lost_reply_of_the_id_reservation_says_nothing_was_written(
        proxied: Tuple[CuttingProxy, Minitask, Any, Any], admin: "redis.Redis[bytes]") -> None:
    proxy, _, add, _ = proxied

    def flow() -> Any:
        return chain(add.s(1), add.s().set(task_id="step-2"))
    chain(add.s(0), add.s().set(task_id="warm-2")).delay()  # warm
    error = _lost(proxy, "step_ids", lambda: flow().delay())
    text = str(error)
    assert not error.sent and not error.task_ids, text
    assert "nothing of the workflow was written" in text, text
    assert not _reserved(admin, "step-2"), text  # released: the same chain goes again
    flow().delay()


def test_a_lost_reply_of_a_workflow_start_keeps_its_step_ids(
        proxied: Tuple[CuttingProxy, Minitask, Any, Any], admin: "redis.Redis[bytes]") -> None:
    proxy, _, add, _ = proxied

    def flow() -> Any:  # (its handle's id: its last step's, made anew each time)
        return chain(add.s(1), add.s().set(task_id="step-2"), add.s())
    chain(add.s(0), add.s().set(task_id="warm-2")).delay()  # warm
    error = _lost(proxy, "spawn", lambda: flow().delay())
    assert error.sent and error.task_ids[1] == "step-2", str(error)
    assert _reserved(admin, "step-2")  # the chain's, which may be in Redis
    with pytest.raises(ConfigurationError) as again:
        flow().delay()  # another chain naming it: refused, never two chains on one step id
    assert "'step-2'" in str(again.value)
