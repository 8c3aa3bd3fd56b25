"""A producer killed (SIGKILL) after reserving its workflow's explicit step ids and before
sending the workflow (issue 29: the documented limit of step_ids.lua's reservations):
what it leaves is those reservations and nothing else, each the step's marker naming
the workflow, without a state, expiring with the workflow's longest result ttl. Until
then another workflow giving a step one of those ids is refused at ``delay()`` naming
the id and the dead producer's workflow, nothing written; one with other ids is sent
and runs; after the ttl the ids are free again. The same workflow sent again (its
handle's id is explicit: the reservations are its own) goes through at once. Real
producer and worker processes on a test-owned redis-server."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Set

import pytest
import redis

from minitask import ConfigurationError, Minitask, chord
from tests.support.processes import Processes, kill_group
from tests.support.reused_ids import (
    DEADLINE, KEYS, OTHER, reused_producer, reused_worker, stop_worker)
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: The dead producer's workflow's result_ttl (s): how long its ids stay reserved. Long
#: enough for the checks made meanwhile on a loaded machine; the test waits it out.
RESULT_TTL = 15.0
#: The reservations the dead producer leaves, and nothing else.
MARKERS = {KEYS.once("A").encode(), KEYS.once("C").encode(), OTHER.once("B").encode()}


def _chord(app: Minitask, body: str = "C", suffix: str = "") -> Any:
    """The stalled producer's chord (tests/apps/reused_ids_stalled.py: its handle's id
    is its body's, ``C``), its body's id ``body`` and its members' given ``suffix``."""
    add, total = app.tasks["add"], app.tasks["total"]
    return chord([add.si(1, 2).set(task_id="A" + suffix),
                  add.si(3, 4).set(task_id="B" + suffix, queue="other")],
                 total.s().set(task_id=body + suffix))


def _keys(client: "redis.Redis[bytes]") -> Set[bytes]:
    return set(client.keys("*"))


def _killed_after_reserving(processes: Processes, server: RedisServer,
                            tmp_path: Path) -> bytes:
    """Run the stalled producer until it has reserved its ids, SIGKILL it there, check
    what it left; its workflow's id."""
    client = server.client()
    said = tmp_path / "producer.log"
    stalled = processes.start("-m", "tests.apps.reused_ids_stalled", log=said,
                              env={"MINITASK_BROKER_URL": server.url,
                                   "RESULT_TTL": str(RESULT_TTL)})
    reserved = wait_until(lambda: re.search(r"^reserved (\S+)$", said.read_text(), re.M),
                          timeout=DEADLINE, message="the producer's reservation")
    wid = reserved.group(1).encode()
    kill_group(stalled)
    assert _keys(client) == MARKERS, said.read_text()  # its reservations, nothing else
    for marker in MARKERS:
        assert client.hgetall(marker) == {b"w": wid}  # reserved, not sent
        assert 0 < client.pttl(marker) <= RESULT_TTL * 1000
    return wid


def test_a_dead_producers_ids_are_refused_to_another_workflow_until_their_ttl(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    client = server.client()
    wid = _killed_after_reserving(processes, server, tmp_path)
    producer = reused_producer(server.client())
    try:
        with pytest.raises(ConfigurationError) as refused:
            _chord(producer, body="D").delay()  # members A and B, another workflow
        said = str(refused.value)
        assert "'A'" in said and "'B'" in said and f"workflow {wid.decode()}" in said, said
        assert _keys(client) == MARKERS  # nothing of the refused one written
        assert all(client.pttl(marker) > 0 for marker in MARKERS)  # refused while reserved
        log = tmp_path / "worker.log"
        worker = reused_worker(processes, server, log, "-c", "2", "-Q", "default,other")
        assert _chord(producer, suffix="-fresh").delay().get(timeout=DEADLINE) == 10
        wait_until(lambda: client.exists(*MARKERS) == 0, timeout=RESULT_TTL + DEADLINE,
                   interval=0.2, message="the reservations to expire")
        assert _chord(producer, body="D").delay().get(timeout=DEADLINE) == 10  # ids free
        stop_worker(worker, log)
    finally:
        producer.close()


def test_the_dead_producers_workflow_sent_again_goes_through(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    client = server.client()
    wid = _killed_after_reserving(processes, server, tmp_path)
    producer = reused_producer(server.client())
    try:
        handle = _chord(producer).delay()  # its handle's id is the dead one's workflow's
        assert handle.id.encode() == wid
        assert client.hget(KEYS.once("A"), "state") == b"sent"
        log = tmp_path / "worker.log"
        worker = reused_worker(processes, server, log, "-c", "2", "-Q", "default,other")
        assert handle.get(timeout=DEADLINE) == 10
        stop_worker(worker, log)
    finally:
        producer.close()
