"""A flow spec whose numbers are beyond those minitask writes (probe 19a, HIGH 2 and 3),
on a real redis-server and a real worker process.

A rate window of 99999999999999999999 ms parsed as a number, and the fetch that had
already taken the task (popped, or promoted from delayed) then failed on a PEXPIRE or
SET PX out of range: Redis kept its earlier writes, so the task was in no key but its
message (queued for ever, counted nowhere), and the limiter's log kept a pace of 2e19
with no ttl. On a fair queue the same window on a group's rate popped the group's
token and failed: the group was never served again. Such a spec (or a group's part)
cannot be read now: the task runs without the limits it cannot read, with a line in
Redis's log naming the task, the field and the problem; its limiter and its group go
on serving the tasks after it.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.apps import spec_range
from tests.support.fair import warnings_logged_server  # noqa: F401 (a fixture)
from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

K = QueueKeys("specrange", "default")
DEADLINE = 30.0
HUGE = b"99999999999999999999"


def _edit(client: "redis.Redis[bytes]", task_id: str, line: int, value: bytes) -> None:
    spec = client.hget(K.flow, task_id)
    assert spec is not None
    lines = spec.split(b"\n")
    lines[line - 1] = value
    client.hset(K.flow, task_id, b"\n".join(lines))


def _ran(client: "redis.Redis[bytes]") -> List[str]:
    return [token.decode() for token in client.lrange("specrange:ran", 0, -1)]


def test_tasks_whose_window_is_beyond_range_run_and_their_limiters_and_groups_go_on(
        logged_server: RedisServer, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    client = logged_server.client()
    app = Minitask("specrange", broker=logged_server.client())
    spec_range.define(app)
    logged, paced, grouped = (app.tasks[name] for name in ("logged", "paced", "grouped"))
    # due in a second, after the worker starts: promoted, then fetched (HIGH 2, 3)
    planted = {
        "logged": logged.apply_async(("logged",), delay=1.0),
        "paced": paced.apply_async(("paced",), delay=1.0),
        "grouped": grouped.apply_async(("tt", "grouped"), delay=1.0),
    }
    _edit(client, planted["logged"].id, 3, HUGE)
    _edit(client, planted["paced"].id, 3, HUGE)
    _edit(client, planted["grouped"].id, 9, HUGE)
    # the middle one of a group's ready set (its token served in turn)
    in_set = [grouped.delay("uu", f"set{n}") for n in range(3)]
    _edit(client, in_set[1].id, 9, HUGE)
    log = tmp_path / "worker.log"
    processes.worker("tests.apps.spec_range", "--pool", "thread", "-c", "2",
                     env={"MINITASK_BROKER_URL": logged_server.url}, log=log)
    try:
        expected = {"logged", "paced", "grouped", "set0", "set1", "set2"}
        wait_until(lambda: expected <= set(_ran(client)), timeout=DEADLINE,
                   message=f"the planted tasks to run (ran: {_ran(client)})")
        for handle in [*planted.values(), *in_set]:
            wait_until(lambda: handle.status() == "succeeded", timeout=DEADLINE,
                       message=f"task {handle.id} to succeed (status {handle.status()})")
        # their limiters and groups go on serving the tasks sent after them
        logged.delay("logged2")
        paced.delay("paced2")
        grouped.delay("tt", "grouped2")
        grouped.delay("uu", "set3")
        later = {"logged2", "paced2", "grouped2", "set3"}
        wait_until(lambda: later <= set(_ran(client)), timeout=DEADLINE,
                   message=f"the tasks sent after them to run (ran: {_ran(client)})")
        # nothing half-written: no limiter key keeps a pace of 2e19, none lives for ever
        for key in client.keys(K.flow_prefix + "*"):
            if key.endswith((b":starts", b":pace")):
                assert client.pttl(key) > 0, key
                if key.endswith(b":starts"):
                    scores = [score for _, score in client.zrange(key, 0, -1, withscores=True)]
                    assert all(score < 1e15 for score in scores), (key, scores)
        text = (tmp_path / "redis.log").read_text(errors="replace")
        for name, line, field in (("logged", 3, "the rate window"), ("paced", 3, "the rate window"),
                                  ("grouped", 9, "the group rate window")):
            task_id = planted[name].id
            assert (f"the flow spec of task {task_id} (field {task_id} of {K.flow}) holds "
                    f"{field} 99999999999999999999 (line {line}), more than minitask "
                    f"writes") in text, text[-3000:]
        assert f"the flow spec of task {in_set[1].id} (field {in_set[1].id}" in text
        assert "left group uu for the ready list" in text, text[-3000:]
    finally:
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
        processes.kill_all()
        app.close()
        client.close()
