"""The spawn scripts name the steps they did not send (their marker was there), and
only those are looked at for being lost: before, every step of the call was, and one
sent by that very call and already done keeping no result looked lost. A forged marker
on an ``ignore_result`` step in the middle of a chain still ends the chain (nothing
after it was sent); on one ending its chain it cannot be told from one that ran, and is
left as it is. A test-owned redis-server and, for the ends, a real worker process."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List

import pytest

from minitask import Minitask, TaskFailed, chain, chord, group
from minitask.stores import workflows as workflows_module
from minitask.stores.workflow_reads import frame_of
from minitask.wire.message import wall_ms
from minitask.wire.serializer import decode_message
from tests.support.lost_steps import (  # noqa: F401 (producer, server: fixtures)
    DEADLINE, KEYS, forge_sent, lost_worker, producer, server)
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("how", ["spawn", "spawn_flow", "spawn_group"])
def test_the_spawn_call_names_exactly_the_steps_it_skipped(
        how: str, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = server.client()
    add, total = producer.tasks["add"], producer.tasks["total"]
    member = producer.tasks["limited_add" if how == "spawn_flow" else "add"]
    members = [member.s(i).set(task_id=f"m-{i}") for i in range(3)]
    then = chord(members, total.s()) if how == "spawn_group" else group(members)
    chain(add.si(1, 1).set(task_id="s-1"), then).delay()
    forge_sent(client, "m-1")
    said: List[List[str]] = []
    sent = workflows_module.send_steps

    def spy(*args: Any) -> List[str]:
        said.append(sent(*args))
        return said[-1]

    monkeypatch.setattr(workflows_module, "send_steps", spy)
    body = client.hget(KEYS.messages, "s-1")
    assert body is not None
    producer.broker.workflows.advance(frame_of(decode_message(body)), 2, wall_ms())
    assert said == [["m-1"]]
    assert client.hexists(KEYS.messages, "m-0") and client.hexists(KEYS.messages, "m-2")
    producer.broker.workflows.advance(frame_of(decode_message(body)), 2, wall_ms())
    assert said[1] == ["m-0", "m-1", "m-2"]  # all sent before: each named, none sent again


def test_a_forged_ignore_result_step_in_the_middle_ends_its_chain(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        tmp_path: Path) -> None:
    client = server.client()
    add, quiet = producer.tasks["add"], producer.tasks["quiet_add"]
    handle = chain(add.si(1, 1), quiet.s(2).set(task_id="q-mid"),
                   add.s(3).set(task_id="q-after")).delay()
    marker = forge_sent(client, "q-mid")
    log = tmp_path / "worker.log"
    worker = lost_worker(processes, server, log)
    with pytest.raises(TaskFailed) as ended:
        handle.get(timeout=DEADLINE)
    assert marker in str(ended.value), str(ended.value)
    assert producer.handle("q-after").status() == "cancelled"
    assert client.exists(KEYS.result("q-mid")) == 0  # keeps no result: none written
    stop_worker(worker, log)


def test_a_forged_ignore_result_step_ending_its_chain_is_left_as_it_is(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        tmp_path: Path) -> None:
    """One that ran leaves nothing at all, so a forged one cannot be told from it."""
    client = server.client()
    add, quiet = producer.tasks["add"], producer.tasks["quiet_add"]
    chain(add.si(1, 1).set(task_id="e-1"), quiet.s(2).set(task_id="e-last")).delay()
    forge_sent(client, "e-last")
    log = tmp_path / "worker.log"
    worker = lost_worker(processes, server, log)
    first = producer.handle("e-1")
    assert first.get(timeout=DEADLINE) == 2
    stop_worker(worker, log)
    assert client.exists(KEYS.result("e-last")) == 0
    assert client.hget(KEYS.once("e-last"), "state") == b"sent"
    assert "e-last" not in log.read_text(errors="replace")
