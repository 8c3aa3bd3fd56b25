"""On a real Redis Cluster, a send that Redis refused (a slot being migrated, a node
down or loading) is sent again until it runs, within a time budget (the client's
``socket_connect_timeout``), and runs once; a reply that cannot be read after the
call was written says the send may have been made.

Before (review29n): five tries in all, ASK and TRYAGAIN alike, 0.05 s apart: a
send during a 0.3 s migration bounced ASK -> TRYAGAIN (the importing node lacks
the new queue's keys) -> ASK and said "could not" after ~0.25 s; a node down for a
second failed the send after ~1 s; LOADING in reply to the call said "lost the
reply" (it had not run); a garbled reply said "could not" (it had run).
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Callable, Iterator, List, Optional, Sequence

import pytest
import redis
import redis.asyncio

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.errors import BrokerError
from tests.support.cutting import said_lost
from tests.support.forged_replies import ForgedCluster, forged_cluster  # noqa: F401
from tests.support.script_runs import ScriptRuns
from tests.support.slot_moves import SlowMove, down_for
from tests.support.topologies import Cluster, slot_of

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]

QUEUE = "q"


@pytest.fixture
def runs(cluster: Cluster) -> Iterator[Callable[[str], ScriptRuns]]:
    """``runs(task_id)``: a count of the runs of the script call that sends it."""
    made: List[ScriptRuns] = []

    def watch(task_id: str) -> ScriptRuns:
        made.append(ScriptRuns(cluster.live_nodes(), task_id.encode()))
        return made[-1]
    yield watch
    for one in made:
        one.close()


@pytest.fixture
def make_app(cluster: Cluster) -> Iterator[Callable[..., Minitask]]:
    """An app of a name of its own on the cluster, its task "t" on ``QUEUE``: sync
    client and, with ``aio``, an async one, both with the client options given."""
    apps = []

    def make(aio: bool = False, **client: Any) -> Minitask:
        port = cluster.live_nodes()[0].port
        options: Any = {}
        if aio:
            options["async_broker"] = redis.asyncio.RedisCluster(
                host="127.0.0.1", port=port, socket_timeout=10, **client)
        app = Minitask(f"ride-{uuid.uuid4().hex[:8]}", broker=cluster.client(**client),
                       **options)
        app.task(name="t", queue=QUEUE)(lambda x: x)
        app.task(name="warm", queue="warm")(lambda x: x)
        apps.append(app)
        return app
    yield make
    for app in apps:
        app.close()


def _send(app: Minitask, aio: bool, task_id: str, before: Optional[Callable[[], Any]] = None,
          warm: Sequence[str] = ("warm",)) -> float:
    """Warm the app up (layout read, scripts loaded, ACL checked: a task sent of each
    of ``warm``), call ``before``, then send "t" as ``task_id``: how long the send took."""
    async def main() -> float:
        try:
            for name in warm:
                await app.tasks[name].adelay(0)
            if before is not None:
                before()
                await asyncio.sleep(0.05)  # (the loop sees what ``before`` did: a node gone)
            started = time.monotonic()
            await app.tasks["t"].aapply_async((1,), task_id=task_id)
            return time.monotonic() - started
        finally:
            await app.aclose()
    if aio:
        return asyncio.run(main())
    for name in warm:
        app.tasks[name].delay(0)
    if before is not None:
        before()
    started = time.monotonic()
    app.tasks["t"].apply_async((1,), task_id=task_id)
    return time.monotonic() - started


def _queued(cluster: Cluster, app: Minitask, task_id: str) -> None:
    """``task_id`` is queued: its message is on the node that serves ``QUEUE``."""
    owner = cluster.owner_of_slot(slot_of(app.name, QUEUE))
    with owner.client() as client:
        assert client.hexists(queue_keys(app.name, QUEUE).messages, task_id)


@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("split", [False, True], ids=["new-queue", "keys-split"])
@pytest.mark.parametrize("seconds", [0.3, 1.0])
def test_a_send_during_a_slot_migration_waits_for_it_and_runs_once(
        cluster: Cluster, make_app: Callable[..., Minitask], runs: Callable[[str], ScriptRuns],
        seconds: float, split: bool, aio: bool) -> None:
    app = make_app(aio)
    if split:  # the queue's keys on the source, one of them moved at once
        app.tasks["t"].delay(0)
    task_id = f"mig-{uuid.uuid4().hex}"
    moves = []
    ran = runs(task_id)
    took = _send(app, aio, task_id, lambda: moves.append(
        SlowMove(cluster, slot_of(app.name, QUEUE), seconds, split=split)))
    move, = moves
    move.close()
    assert move.finished.is_set()
    assert seconds - 0.1 < took < seconds + 3, took
    assert ran.count() == 1, "the send did not run once"
    _queued(cluster, app, task_id)


@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
def test_a_send_waits_out_its_node_down_for_a_moment_and_runs_once(
        cluster: Cluster, make_app: Callable[..., Minitask], runs: Callable[[str], ScriptRuns],
        aio: bool) -> None:
    # a connect timeout of 10 s: the budget rides out the node's restart, whose
    # cluster state stays down for 2 s (Redis's writable delay for a rebooted primary)
    app = make_app(aio, socket_connect_timeout=10)
    owner = cluster.owner_of_slot(slot_of(app.name, QUEUE))
    restarts = []
    task_id = f"down-{uuid.uuid4().hex}"
    ran = runs(task_id)
    try:
        took = _send(app, aio, task_id, lambda: restarts.append(down_for(cluster, owner, 1.5)),
                     warm=("t",))  # (its node's ACL checked before it goes down)
    finally:
        for thread in restarts:
            thread.join(timeout=60)
        cluster.wait_until_stable()
    assert took > 1.5, took
    assert ran.count() == 1, "the send did not run once"
    _queued(cluster, app, task_id)


@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
def test_a_migration_that_never_ends_fails_the_send_within_the_budget(
        cluster: Cluster, make_app: Callable[..., Minitask], runs: Callable[[str], ScriptRuns],
        aio: bool) -> None:
    app = make_app(aio, socket_connect_timeout=2)
    moves = []
    task_id = f"stuck-{uuid.uuid4().hex}"
    ran = runs(task_id)
    started: List[float] = []

    def begin() -> None:
        moves.append(SlowMove(cluster, slot_of(app.name, QUEUE), None))
        started.append(time.monotonic())
    try:
        with pytest.raises(BrokerError) as refused:
            _send(app, aio, task_id, begin)
        took = time.monotonic() - started[0]  # (the send alone)
    finally:
        for move in moves:
            move.close()
    assert "could not" in str(refused.value) and not refused.value.sent, str(refused.value)
    assert "rehashing" in str(refused.value), str(refused.value)  # (TRYAGAIN's own words)
    assert 2 <= took < 2 + 1.5, took  # (the budget: socket_connect_timeout)
    assert ran.count() == 0


def _forged_send(forged: ForgedCluster, aio: bool, reply: str) -> Optional[BrokerError]:
    """Send "t" with its call's reply forged as ``reply`` (the script loaded on its node:
    no NOSCRIPT): the call ran once and its task is queued; the send's error, if any."""
    app = _forged_app(forged, aio)
    task_id = f"{reply}-{uuid.uuid4().hex}"
    ran = ScriptRuns(forged.cluster.nodes, task_id.encode())
    error = None
    try:
        try:
            _send(app, aio, task_id, lambda: forged.forge(task_id.encode(), reply),
                  warm=("warm", "t"))
        except BrokerError as exc:
            error = exc
            said_lost(error, task_id)
        assert forged.forged() == 1
        assert ran.count() == 1, "the send did not run once"
    finally:
        ran.close()
        app.close()
    _queued(forged.cluster, app, task_id)
    return error


@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
def test_loading_in_reply_to_the_call_is_a_refusal_sent_again(
        forged_cluster: ForgedCluster, aio: bool) -> None:  # noqa: F811
    assert _forged_send(forged_cluster, aio, "loading") is None


@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
def test_a_garbled_reply_to_the_call_says_it_may_have_been_made(
        forged_cluster: ForgedCluster, aio: bool) -> None:  # noqa: F811
    assert _forged_send(forged_cluster, aio, "garbled") is not None


def _forged_app(forged: ForgedCluster, aio: bool) -> Minitask:
    options: Any = {"async_broker": forged.async_client()} if aio else {}
    app = Minitask(f"forged-{uuid.uuid4().hex[:8]}", broker=forged.client(), **options)
    app.task(name="t", queue=QUEUE)(lambda x: x)
    app.task(name="warm", queue="warm")(lambda x: x)
    return app
