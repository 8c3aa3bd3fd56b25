"""A send of a task with limits refused at its ready list's push (a list of another
type planted there; an ACL changed at run time, without RPUSH) leaves no flow spec for
the id it did not queue.

enqueue_flow.lua writes a new id's spec before enqueue_base() queues it (so no task is
ever queued without its limits), and left it there when the push was then refused: a
later send of the same id as a task with no limits was parked under the old spec's
limiter, and while the spec stayed every fetch of the queue ran flow control (a review,
issue 29). Now the specs of ids that did not become pending are taken back, and a
refused HDEL is named in the error. A test-owned redis-server; the sender is an ACL
user whose check before its first send passed (it is asked once a client)."""
from __future__ import annotations

import time
from typing import Callable, Iterator, List, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import queue_keys
from tests.support.acl import user_without
from tests.support.clock import ManualClock
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

K = queue_keys("orphan", "default")


@pytest.fixture
def server(start_redis: Callable[..., RedisServer]) -> RedisServer:
    return start_redis()


def _app(broker: object, clock: ManualClock) -> Minitask:
    app = Minitask("orphan", broker=broker, clock=clock)

    @app.task(name="capped", max_running=1, ignore_result=True)
    def capped(n: int) -> None:
        pass

    @app.task(name="plain", ignore_result=True)
    def plain(n: int) -> None:
        pass

    return app


@pytest.fixture
def apps(server: RedisServer) -> Iterator[Tuple[Minitask, "redis.Redis[bytes]"]]:
    """The sender (user ``limited``: every command until a test takes one away; its
    ACL check passed with a first send) and an admin client."""
    admin: "redis.Redis[bytes]" = server.client()
    sender = _app(user_without(admin, server, "nothing"), ManualClock(int(time.time() * 1000)))
    # (priority 9: not in the ready list a test plants over)
    sender.tasks["plain"].apply_async((0,), task_id="first", priority=9)
    try:
        yield sender, admin
    finally:
        sender.close()
        admin.close()


def _fetched(app: Minitask) -> List[str]:
    got = app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=60_000,
                                  count=10, max_deliveries=5)
    return [delivery.message().id for delivery in got.deliveries]


def _refused(app: Minitask, admin: "redis.Redis[bytes]", how: str) -> str:
    """Send capped X while its ready list refuses the push; the error's text."""
    ready = K.ready[9 - 5]  # the default priority's
    if how == "planted":
        admin.set(ready, "planted")
    else:
        admin.execute_command("ACL", "SETUSER", "limited", *(f"-{c}" for c in how.split()))
    try:
        with pytest.raises(BrokerError) as refused:
            app.tasks["capped"].apply_async((1,), task_id="X")
    finally:
        if how == "planted":
            admin.delete(ready)
        else:
            admin.execute_command("ACL", "SETUSER", "limited", *(f"+{c}" for c in how.split()))
    return str(refused.value)


def _acl(said: str) -> bool:
    """Whether an error is an ACL's refusal (Redis 7.0 says ERR, later ones NOPERM)."""
    return "NOPERM" in said or "can't run this command" in said


@pytest.mark.parametrize("how", ["planted", "rpush"])
def test_a_refused_send_leaves_no_spec_and_a_plain_resend_is_not_parked(
        apps: Tuple[Minitask, "redis.Redis[bytes]"], how: str) -> None:
    sender, admin = apps
    said = _refused(sender, admin, how)
    assert ("WRONGTYPE" in said) if how == "planted" else _acl(said), said
    assert not admin.hexists(K.messages, "X")
    assert not admin.hexists(K.flow, "X"), admin.hgetall(K.flow)
    # the review's sequence: capped Y takes capped's only slot; X sent again with no
    # limits is fetched beside it, parked under no limiter
    sender.tasks["capped"].apply_async((2,), task_id="Y")
    sender.tasks["plain"].apply_async((3,), task_id="X")
    assert set(_fetched(sender)) == {"first", "Y", "X"}
    assert admin.hkeys(K.flow) == [b"Y"]
    assert [key for key in admin.scan_iter(match=K.flow_prefix + "*park*")] == []


def test_a_spec_of_an_id_made_pending_before_the_refusal_stays(
        apps: Tuple[Minitask, "redis.Redis[bytes]"]) -> None:
    """Refused at its earlier result's DEL, X is queued: it keeps its limits."""
    sender, admin = apps
    assert _acl(_refused(sender, admin, "del"))
    assert admin.hexists(K.messages, "X") and admin.hexists(K.flow, "X")
    sender.tasks["capped"].apply_async((2,), task_id="Y")
    first = _fetched(sender)
    assert len({"X", "Y"} & set(first)) == 1, first  # capped's one slot: one of them


def test_a_refused_hdel_is_named_in_the_error(
        apps: Tuple[Minitask, "redis.Redis[bytes]"]) -> None:
    sender, admin = apps
    said = _refused(sender, admin, "rpush hdel")
    assert _acl(said) and "flow specs" in said and "stay" in said, said
    assert admin.hexists(K.flow, "X")  # left, as the error says
