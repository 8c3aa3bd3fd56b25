"""A schedule moved to another queue (``add_schedule`` with a new ``queue``) is saved
there first, then given up by its old queue: a save Redis refuses leaves it where it
was (it was removed first, and lost), and while a replica lags (durability) every
write of an add or a remove is made, then said once (the first unconfirmed removal
stopped the add before its save, and a remove before the other queues); and so is
``minitask unsubscribe``'s. probe29j."""
from __future__ import annotations

from typing import Callable, List

import pytest

from minitask import BrokerError, DurabilityError, Minitask
from minitask.broker.keys import queue_keys
from tests.support.acl import redis_major, user_without
from tests.support.cli import operate_with, run
from tests.support.replicas import frozen, in_sync, pair_per_test  # noqa: F401 (a fixture)
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _app(url: str, name: str = "moves", **durable: object) -> Minitask:
    app = Minitask(name, broker=url, **durable)  # type: ignore[arg-type]

    @app.task(queue="a0")
    def add(x: int) -> int:
        return x + 1

    return app


def _add(app: Minitask, name: str, queue: str, x: int = 1) -> object:
    task = next(iter(app.tasks.values()))
    return app.add_schedule(name, task, every=60, args=(x,), queue=queue)


def _settled(primary: RedisServer, replica: RedisServer,
             setup: Callable[[Minitask], object], name: str = "moves") -> None:
    """``setup`` made by an app that does not wait for replicas, then the replica in
    sync: on a loaded machine a replica could miss a 0.3 s WAIT of the setup (a
    DurabilityError before the part tested), whose writes need no confirmation."""
    plain = _app(primary.url, name)
    try:
        setup(plain)
    finally:
        plain.close()
    wait_until(lambda: in_sync(primary, replica), timeout=60, message="the replica to sync")


def _where(app: Minitask, name: str) -> List[str]:
    return [queue for queue in ("a0", "d1", "d2") if app.broker.schedules.one(queue, name)]


def test_a_move_onto_a_schedules_key_of_another_type_moves_it_aside_and_saves(
        redis_server: RedisServer) -> None:
    """The new queue's ``schedules`` of another type is moved aside whole to
    ``schedules:foreign`` (kept) and the move goes on: the schedule is at d1 only
    (guarantees.rst; it was refused, the schedule left at a0)."""
    app = _app(redis_server.url)
    _add(app, "mv", "a0")
    admin = redis_server.client()
    target = queue_keys("moves", "d1").schedules
    admin.set(target, "x")
    _add(app, "mv", "d1")
    assert _where(app, "mv") == ["d1"]
    assert admin.type(f"{target}:foreign") == b"string"
    assert admin.get(f"{target}:foreign") == b"x"
    admin.close()
    app.close()


def test_a_move_redis_refuses_leaves_the_schedule_where_it_was(
        start_redis: Callable[..., RedisServer]) -> None:
    """An ACL changed after the first add takes away a command the save at the new
    queue runs first (HSTRLEN, schedule_save.lua): the move is refused, and the
    schedule is still whole at its old queue (it was removed first, and lost)."""
    server = start_redis()  # this test's own: its ACL user
    admin = server.client()
    if redis_major(admin) < 6:
        pytest.skip("ACL users need Redis 6")
    app = _app(user_without(admin, server, "nothing"))
    reader = _app(server.url)
    try:
        _add(app, "mv", "a0")
        before = reader.broker.schedules.one("a0", "mv")
        admin.execute_command("ACL", "SETUSER", "limited", "-hstrlen")
        with pytest.raises(BrokerError):
            _add(app, "mv", "d1", 2)
        assert _where(reader, "mv") == ["a0"]
        assert reader.broker.schedules.one("a0", "mv") == before
    finally:
        app.close()
        reader.close()
        admin.close()


def test_adds_and_removes_while_a_replica_lags_make_every_write(
        pair: List[RedisServer]) -> None:
    primary, replica = pair
    _settled(primary, replica, lambda app: (_add(app, "mv", "a0"), _add(app, "gone", "d2", 2)))
    app = _app(primary.url, durability="replicated", min_replicas=1,
               durability_timeout=0.3)
    with frozen(replica, 60):
        with pytest.raises(DurabilityError):
            _add(app, "mv", "d1")
        with pytest.raises(DurabilityError):
            _add(app, "new", "d1", 3)
        with pytest.raises(DurabilityError):
            app.remove_schedule("gone")
    assert _where(app, "mv") == ["d1"]
    assert _where(app, "new") == ["d1"]
    assert _where(app, "gone") == []
    app.close()


def test_an_unsubscribe_replicas_leave_unconfirmed_is_said_done(
        pair: List[RedisServer], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``minitask unsubscribe`` while a replica lags: made on the primary, so said
    done, with a note (it printed an error and exited 3, the subscriber gone)."""
    import minitask.cli.unsubscribe as command
    primary, replica = pair
    app = Minitask("unsubs", broker=primary.url, durability="replicated",
                   min_replicas=1, durability_timeout=0.3)

    @app.task(queue="bc", broadcast=True)
    def tidings(n: int) -> int:
        return n

    _settled(primary, replica,
             lambda plain: plain.broker.broadcasts.subscribe("bc", "ghostw", 0), "unsubs")
    operate_with(app, monkeypatch, command)
    with frozen(replica, 60):
        code, out = run(capsys, "unsubscribe", "-A", "unused:app", "bc", "ghostw")
    assert code == 0, out
    assert "unsubscribed ghostw from the broadcasts of queue bc (unconfirmed by replicas" in out
    assert [s.name for s in app.subscribers("bc")] == []
