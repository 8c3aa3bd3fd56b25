"""Queue-wide fair-queue keys of another type (issue 29, probe29n L5): a queue's ``flow``
hash or ``flow:groups_solo`` planted by someone else made every grouped send of the
queue fail with an error naming the key. Now the send moves the key aside whole (to
``<key>:foreign``, one WARNING in Redis's log, as a foreign wake list is) once its
checks have passed, and goes on: every group's task runs on a real worker process. A
group's own ready set of another type still refuses that group's sends only (naming the
key): the other groups go on.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.apps.fair_aside import producer
from tests.support.moved_aside import served_aside
from tests.support.processes import Processes

pytestmark = pytest.mark.integration

DEADLINE = 30.0
KEYS = queue_keys("fa", "fa")
PLANTED = b"someone else's"


@pytest.fixture
def served(processes: Processes, tmp_path: Path,
           request: pytest.FixtureRequest) -> Iterator[Tuple[Minitask, Path]]:
    """A redis-server logging to a file, a worker process serving ``fa``, the app."""
    with served_aside(processes, tmp_path, request, "tests.apps.fair_aside", "fa",
                      producer) as (app, server_log):
        # steady state first: the worker serves grouped tasks
        assert app.tasks["fa.plain"].delay("warm", 0).get(timeout=DEADLINE) == 0
        yield app, server_log


@pytest.mark.parametrize("planted", ["flow", "groups_solo"])
def test_a_grouped_send_moves_a_shared_key_of_another_type_aside_and_its_task_runs(
        served: Tuple[Minitask, Path], planted: str) -> None:
    app, server_log = served
    admin: "redis.Redis[bytes]" = app.broker.transport.client
    key = getattr(KEYS, planted)
    admin.delete(key)
    admin.set(key, PLANTED)
    plain, limited = app.tasks["fa.plain"], app.tasks["fa.limited"]
    handles = [plain.delay("a", 1), limited.delay("b", 2), app.tasks["fa.ungrouped"].delay(3),
               plain.delay("c", 4)]
    handles += plain.delay_many([("a", 5), ("d", 6)])
    assert [handle.get(timeout=DEADLINE) for handle in handles] == [1, 2, 3, 4, 5, 6]
    # kept aside whole for its owner, and said once: the key is minitask's again
    assert admin.get(f"{key}:foreign") == PLANTED
    assert admin.exists(f"{key}:foreign2") == 0
    assert admin.type(key) in (b"hash", b"none")
    said = server_log.read_text(errors="replace").count(f"moved {key} aside to {key}:foreign")
    assert said == 1


def test_a_groups_own_ready_set_of_another_type_refuses_only_its_sends(
        served: Tuple[Minitask, Path]) -> None:
    app, _ = served
    admin: "redis.Redis[bytes]" = app.broker.transport.client
    key = KEYS.fair_group("a", "ready")
    admin.set(key, PLANTED)
    plain = app.tasks["fa.plain"]
    with pytest.raises(Exception, match="g:a:ready"):
        plain.delay("a", 1)  # its group's own key: refused, naming it, nothing written
    assert [plain.delay(g, n).get(timeout=DEADLINE) for g, n in (("b", 2), ("c", 3))] == [2, 3]
    assert admin.get(key) == PLANTED


def test_a_refused_grouped_send_moves_nothing_aside(served: Tuple[Minitask, Path]) -> None:
    """The shared key is moved only once the call's checks pass: a send refused for its
    ready list (of another type too) changes nothing, the planted flow hash included."""
    app, _ = served
    admin: "redis.Redis[bytes]" = app.broker.transport.client
    ready = KEYS.ready[9 - 5]  # the default priority's
    admin.set(KEYS.flow, PLANTED)
    admin.set(ready, PLANTED)
    for sent in (lambda: app.tasks["fa.plain"].delay("e", 1),
                 lambda: app.tasks["fa.limited"].delay("f", 2)):
        with pytest.raises(Exception, match="ready"):
            sent()
    assert admin.get(KEYS.flow) == PLANTED and admin.exists(f"{KEYS.flow}:foreign") == 0
    admin.delete(ready)
    assert app.tasks["fa.plain"].delay("e", 3).get(timeout=DEADLINE) == 3
    assert admin.get(f"{KEYS.flow}:foreign") == PLANTED
