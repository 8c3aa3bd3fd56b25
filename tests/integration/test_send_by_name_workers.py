"""Sending by name end to end, on the suite's real redis-server with a real worker on
each pool: a second program that imports nothing of the app's code sends a task, a
routed task, a chain and a chord by name and gets their results; a call whose arguments
do not bind is dead-lettered with ArgumentError on its first attempt, never retried; a
name no task has, sent to a queue only a route names, is dead-lettered with its hint."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Dict, Iterator

import pytest
import redis

from minitask import Minitask, TaskFailed
from tests.support.processes import Processes, exit_code
from tests.support.reports import did_fail
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

DEADLINE = 120.0
APP = "tests.apps.routed"
#: The workers' routes, copied: the producer imports nothing of tests.apps.routed.
ROUTES = {"routed.billing.*": {"queue": "billing", "priority": 7},
          "routed.remote.*": {"queue": "remote"}}

PRODUCER = textwrap.dedent("""\
    import json
    import sys

    from minitask import Minitask, chain, chord

    routes = json.loads(sys.argv[2])
    app = Minitask("routed", routes=routes)
    assert app.tasks == {}
    sums = app.send("routed.add", (2, 3))
    charged = app.send("routed.billing.charge", (250,), {"currency": "USD"})
    steps = chain(app.signature("routed.add", 1, 2), app.signature("routed.add", 10),
                  app.signature("routed.add", 100)).delay()
    summed = chord([app.signature("routed.add", i, i) for i in range(5)],
                   app.signature("routed.total")).delay()
    results = {"add": sums.get(timeout=120), "charge": charged.get(timeout=120),
               "chain": steps.get(timeout=120), "chord": summed.get(timeout=120),
               "imported": sorted(m for m in sys.modules if m.split(".")[0] == "tests")}
    with open(sys.argv[1], "w") as out:
        json.dump(results, out)
""")


@pytest.fixture(params=["thread", "process", "asyncio"])
def worker(request: pytest.FixtureRequest, redis_server: RedisServer,
           admin: "redis.Redis[bytes]", processes: Processes,
           tmp_path: Path) -> Iterator[Dict[str, str]]:
    """A worker of tests.apps.routed on one pool, serving its default queues."""
    env = {"MINITASK_BROKER_URL": redis_server.url}
    log = tmp_path / "worker.log"
    processes.worker(APP, "--pool", request.param, "-c", "2", env=env, log=log)
    try:
        yield env
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])


@pytest.fixture
def producer(redis_server: RedisServer) -> Iterator[Minitask]:
    app = Minitask("routed", broker=redis_server.url, routes=ROUTES)
    try:
        yield app
    finally:
        app.close()


def test_a_program_that_imports_none_of_the_app_sends_by_name_and_gets_results(
        worker: Dict[str, str], processes: Processes, tmp_path: Path) -> None:
    script, out = tmp_path / "producer.py", tmp_path / "results.json"
    script.write_text(PRODUCER)
    log = tmp_path / "producer.log"
    sent = processes.start(str(script), str(out), json.dumps(ROUTES), env=worker, log=log)
    assert exit_code(sent, DEADLINE) == 0, log.read_text(errors="replace")
    assert json.loads(out.read_text()) == {"add": 5, "charge": "250 USD", "chain": 113,
                                           "chord": 20, "imported": []}


def test_a_call_that_does_not_bind_is_dead_lettered_on_attempt_one_never_retried(
        worker: Dict[str, str], producer: Minitask) -> None:
    too_many = producer.send("routed.add", (1, 2, 3))
    keyword = producer.send("routed.billing.charge", (1,), {"colour": "red"})
    for handle, name, problem in ((too_many, "routed.add", "too many positional arguments"),
                                  (keyword, "routed.billing.charge",
                                   "unexpected keyword argument 'colour'")):
        with pytest.raises(TaskFailed) as failed:
            handle.get(timeout=DEADLINE)
        assert failed.value.exc_type == "ArgumentError"
        assert failed.value.message.startswith(f"task {name!r}: ")
        assert problem in failed.value.message
    dead = {d.task_id: d for d in producer.dead_letters()}
    for handle in (too_many, keyword):  # the tasks retry errors twice: not this one
        assert (dead[handle.id].attempts, dead[handle.id].reason) == (
            1, "its arguments do not fit the task")


def test_an_unknown_name_in_a_queue_only_a_route_names_is_dead_lettered_with_its_hint(
        worker: Dict[str, str], producer: Minitask) -> None:
    handle = producer.send("routed.remote.echo", ("hi",))
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=DEADLINE)
    assert failed.value.exc_type == "UnknownTaskError"
    assert "no task named 'routed.remote.echo'" in failed.value.message
    dead = {d.task_id: d for d in producer.dead_letters()}
    assert (dead[handle.id].queue, dead[handle.id].reason) == ("remote", "unknown task")
