"""A workflow spanning two queues, one of whose keys holds data minitask did not write
(a string where its messages hash or a step's marker belongs), was half-sent: its
steps in the other queue were queued (and ran) before the refusal, so a caller who
retried ran them twice. It is now refused, naming the key and its type, before
anything is written. A test-owned redis-server; no worker (nothing is queued)."""
from __future__ import annotations

from typing import Iterator

import pytest

from minitask import BrokerError, Minitask, chord, group
from minitask.broker.keys import queue_keys
from minitask.stores.workflows import SPAWN_CHUNK
from tests.support.refused_workflows import key_set, two_queue_app
from tests.support.reused_ids import server  # noqa: F401
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

MAIN = queue_keys("halfsent", "default")
OTHER = queue_keys("halfsent", "other")
#: The ready list of the default priority (5): where the steps go. (A wake list of
#: another type refuses nothing: it is left as it is, as delay() leaves it.)
READY = 9 - 5


@pytest.fixture
def app(server: RedisServer) -> Iterator[Minitask]:  # noqa: F811 (imported)
    app = two_queue_app("halfsent", server.client())
    yield app
    app.close()


@pytest.mark.parametrize("planted", [OTHER.messages, OTHER.ready[READY]])
def test_a_group_over_two_queues_with_a_foreign_queue_key_sends_nothing(
        server: RedisServer, app: Minitask, planted: str) -> None:  # noqa: F811 (imported)
    client = server.client()
    client.set(planted, "x")
    before = key_set(server)
    add, ping = app.tasks["add"], app.tasks["ping"]
    with pytest.raises(BrokerError) as refused:
        group([add.si(1, 1), ping.si(2)]).delay()
    assert key_set(server) == before, key_set(server) - before  # nothing of it written
    said = str(refused.value)
    assert planted in said and "string" in said and "nothing" in said, said
    assert client.get(planted) == b"x"


def test_a_chord_whose_explicit_id_marker_is_foreign_sends_nothing(
        server: RedisServer, app: Minitask) -> None:  # noqa: F811 (imported)
    client = server.client()
    client.set(OTHER.once("B"), "x")
    before = key_set(server)
    add, ping, total = app.tasks["add"], app.tasks["ping"], app.tasks["total"]
    with pytest.raises(BrokerError) as refused:
        chord([add.si(1, 1).set(task_id="A"), ping.si(2).set(task_id="B")],
              total.s()).delay()
    assert key_set(server) == before, key_set(server) - before  # A neither sent nor reserved
    said = str(refused.value)
    assert OTHER.once("B") in said and "string" in said and "nothing" in said, said
    assert client.exists(MAIN.once("A")) == 0


def test_one_queue_sent_in_several_calls_with_a_foreign_ready_list_sends_nothing(
        server: RedisServer, app: Minitask) -> None:  # noqa: F811 (imported)
    """More than SPAWN_CHUNK steps in one queue are several script calls: the first
    (its wake list refused after its writes, before wake lists were left as they are)
    left its steps queued."""
    client = server.client()
    client.set(MAIN.ready[READY], "x")
    before = key_set(server)
    add = app.tasks["add"]
    with pytest.raises(BrokerError) as refused:
        group([add.si(n, 1) for n in range(SPAWN_CHUNK + 1)]).delay()
    assert key_set(server) == before, len(key_set(server) - before)
    assert MAIN.ready[READY] in str(refused.value), str(refused.value)
