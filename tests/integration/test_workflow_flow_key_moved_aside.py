"""A workflow whose steps carry a flow spec (a grouped or limited task) goes on past
its queue's ``flow`` key of another type (issue 29, review29k L1): spawn_flow.lua
refused it, naming the key, while a grouped or limited ``delay()`` already moved such a
key aside (enqueue_flow.lua). Now the workflow's send moves it aside whole (to
``flow:foreign``, one WARNING in Redis's log) once every check of the call has passed,
and its steps run on a real worker process; a workflow refused by a check moves
nothing. A workflow over several queues, checked first (spawn_check.lua), refused the
key too.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Tuple

import pytest
import redis

from minitask import Minitask, chain, group
from minitask.broker.keys import queue_keys
from tests.apps.spawn_aside import producer
from tests.support.moved_aside import served_aside
from tests.support.processes import Processes

pytestmark = pytest.mark.integration

DEADLINE = 30.0
KEYS = queue_keys("sa", "sa")
PLANTED = b"someone else's"


@pytest.fixture
def served(processes: Processes, tmp_path: Path,
           request: pytest.FixtureRequest) -> Iterator[Tuple[Minitask, Path]]:
    """A redis-server logging to a file, a worker process serving ``sa``, the app."""
    with served_aside(processes, tmp_path, request, "tests.apps.spawn_aside", "sa,sb",
                      producer) as (app, server_log):
        assert app.tasks["sa.grouped"].delay("warm", 0).get(timeout=DEADLINE) == 0  # serving
        yield app, server_log


def steps(app: Minitask, kind: str, n: int) -> Any:
    task = app.tasks[f"sa.{kind}"]
    return task.si(n) if kind == "rated" else task.si("W", n)


@pytest.mark.parametrize("kind", ["grouped", "group_limited", "rated"])
def test_a_workflow_moves_a_flow_key_of_another_type_aside_and_its_steps_run(
        served: Tuple[Minitask, Path], kind: str) -> None:
    app, server_log = served
    admin: "redis.Redis[bytes]" = app.broker.transport.client
    admin.delete(KEYS.flow)
    admin.set(KEYS.flow, PLANTED)
    handle = chain(steps(app, kind, 1), steps(app, kind, 2)).apply_async()
    assert handle.get(timeout=DEADLINE) == 2
    # kept aside whole for its owner, and said once: the key is minitask's again
    assert admin.get(f"{KEYS.flow}:foreign") == PLANTED
    assert admin.exists(f"{KEYS.flow}:foreign2") == 0
    assert admin.type(KEYS.flow) in (b"hash", b"none")
    said = server_log.read_text(errors="replace").count(
        f"moved {KEYS.flow} aside to {KEYS.flow}:foreign")
    assert said == 1


@pytest.mark.parametrize("kind", ["grouped", "group_limited", "rated"])
def test_a_workflow_over_two_queues_goes_on_past_a_flow_key_of_another_type(
        served: Tuple[Minitask, Path], kind: str) -> None:
    """Sent in two script calls, checked first together (spawn_check.lua), which
    refused such a key too."""
    app, _ = served
    admin: "redis.Redis[bytes]" = app.broker.transport.client
    admin.delete(KEYS.flow)
    admin.set(KEYS.flow, PLANTED)
    handle = group(steps(app, kind, 1), app.tasks["sa.elsewhere"].si(2)).apply_async()
    assert handle.get(timeout=DEADLINE) == [1, 2]
    assert admin.get(f"{KEYS.flow}:foreign") == PLANTED


@pytest.mark.parametrize("kind", ["grouped", "group_limited", "rated"])
def test_a_refused_workflow_moves_nothing_aside(
        served: Tuple[Minitask, Path], kind: str) -> None:
    """The flow key is moved only once the call's checks pass: a workflow refused for
    the delayed set its first step goes to (of another type too) changes nothing."""
    app, _ = served
    admin: "redis.Redis[bytes]" = app.broker.transport.client
    admin.set(KEYS.flow, PLANTED)
    admin.set(KEYS.delayed, PLANTED)
    # its first step due a moment later: it goes to the delayed set
    sent: Callable[[], Any] = lambda: chain(steps(app, kind, 1).set(delay=0.2),  # noqa: E731
                                            steps(app, kind, 2)).apply_async()
    with pytest.raises(Exception, match="delayed"):
        sent()
    assert admin.get(KEYS.flow) == PLANTED and admin.exists(f"{KEYS.flow}:foreign") == 0
    admin.delete(KEYS.delayed)
    assert sent().get(timeout=DEADLINE) == 2
    assert admin.get(f"{KEYS.flow}:foreign") == PLANTED
