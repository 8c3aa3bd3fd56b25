"""Workflows end to end: the suite's real redis-server, real worker processes."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import redis

from minitask import GroupHandle, Minitask, TaskFailed, chain, chord, group
from minitask.admin.workflows import workflow as workflow_record
from minitask.dashboard.web import Dashboard
from tests.apps.canvas import producer
from tests.support.pages import get
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 120.0
APP = "tests.apps.canvas"


class Canvas:
    """The producer's app, its tasks by short name, and the markers the tasks leave."""

    def __init__(self, app: Minitask, client: "redis.Redis[bytes]") -> None:
        self.app = app
        self.client = client

    def __getattr__(self, short: str) -> Any:
        return self.app.tasks[f"canvas.{short}"]

    def idle(self) -> bool:
        counts = [self.app.broker.queues.counts(q) for q in ("default", "other", "far")]
        return all(c["ready"] + c["running"] + c["scheduled"] == 0 for c in counts)

    def marks(self, key: str) -> List[str]:
        return [raw.decode() for raw in self.client.lrange(f"marks:{key}", 0, -1)]


@pytest.fixture
def canvas(redis_server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
           tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Canvas]:
    """Two worker processes (process pool, two children each) serving every queue."""
    env: Dict[str, str] = {"MINITASK_BROKER_URL": redis_server.url, "TEST_VISIBILITY": "5"}
    logs = [tmp_path / f"worker-{i}.log" for i in range(2)]
    for log in logs:
        processes.worker(APP, "--pool", "process", "-c", "2", env=env, log=log)
    app = producer(redis_server.client())
    try:
        yield Canvas(app, admin)
    finally:
        app.close()
        if did_fail(request):
            for log in logs:
                print(log.read_text(errors="replace")[-6000:])


def test_chain_of_three_across_two_queues(canvas: Canvas) -> None:
    handle = (canvas.add.s(1, 1) | canvas.mul.s(10) | canvas.add.s(5)).delay()
    assert handle.get(timeout=DEADLINE) == 25


def test_group_of_a_thousand(canvas: Canvas) -> None:
    handle = group(canvas.add.s(i, i) for i in range(1000)).delay()
    assert handle.get(timeout=DEADLINE) == [2 * i for i in range(1000)]
    assert handle.status() == {"succeeded": 1000}


def test_chord_of_two_hundred_members_that_randomly_retry_once(canvas: Canvas) -> None:
    header = group(canvas.member.s(f"m{i}", i, retry_chance=0.5) for i in range(200))
    handle = chord(header, canvas.total.s(tag="c200")).delay()
    assert handle.get(timeout=DEADLINE) == sum(range(200))
    assert len(canvas.marks("body:c200")) == 1


def test_nesting_group_of_chains_and_chain_ending_in_a_chord(canvas: Canvas) -> None:
    chains = group(chain(canvas.add.s(i, 1), canvas.mul.s(2), canvas.add.s(1))
                   for i in range(10)).delay()
    ending = chain(canvas.add.s(1, 1),
                   chord([canvas.mul.s(i) for i in range(5)], canvas.total.s(tag="end"))).delay()
    assert isinstance(chains, GroupHandle)
    assert chains.get(timeout=DEADLINE) == [2 * (i + 1) + 1 for i in range(10)]
    assert ending.get(timeout=DEADLINE) == sum(2 * i for i in range(5))


def test_dead_member_body_never_runs_on_error_once_later_steps_cancelled(
        canvas: Canvas) -> None:
    header = [canvas.member.s(f"d{i}", i) for i in range(5)]
    header += [canvas.boom.s(1), canvas.boom.s(2)]
    workflow = chain(chord(header, canvas.total.s(tag="dead")),
                     canvas.add.s(1).set(task_id="after-dead-1"), canvas.mul.s(2))
    handle = workflow.on_error(canvas.report.s("dead")).delay()
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=DEADLINE)
    # both booms dead and nothing left to run: every error callback sent has run
    wait_until(lambda: len(canvas.app.dead_letters()) == 2 and canvas.idle(), timeout=DEADLINE,
               message="both failures recorded and the queues idle")
    dead = {letter.task_id: letter.name for letter in canvas.app.dead_letters()}
    assert dead.get(failed.value.task_id) == "canvas.boom"
    assert canvas.marks("body:dead") == []
    # once, with the id of a step that ended dead (two died at once: either one)
    assert len(canvas.marks("errors:dead")) == 1
    assert set(canvas.marks("errors:dead")) <= set(dead)
    assert canvas.app.handle("after-dead-1").status() == "cancelled"
    assert handle.status() == "cancelled"


def test_chord_with_an_empty_header_runs_its_body_with_an_empty_list(canvas: Canvas) -> None:
    """No member to wait for: the body is sent at once with [] (the plan and handle
    records go with it, as no step came before), and the workflow's record and page
    show a chord of one task, its body, succeeded."""
    handle = chord([], canvas.received.s(tag="empty")).delay()
    assert handle.get(timeout=DEADLINE) == 0
    assert canvas.marks("received:empty") == ["[]"]
    found = workflow_record(canvas.app, handle.id)
    assert found is not None
    assert (found["kind"], found["tasks"], found["counts"]) == ("chord", 1, {"succeeded": 1})
    assert found["root"]["header"] == [] and found["root"]["more"] == 0
    assert (found["root"]["body"]["id"], found["root"]["body"]["state"]) == (handle.id,
                                                                             "succeeded")
    status, page = get(Dashboard(canvas.app), f"/workflow/{handle.id}")
    assert status.startswith("200")
    assert "A chord of 1 task(s)" in page and '<span id="counts">1 succeeded</span>' in page
    assert f'data-id="{handle.id}" data-state="succeeded"' in page
