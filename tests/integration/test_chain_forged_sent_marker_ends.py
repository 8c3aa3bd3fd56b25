"""A chain step whose marker (``once:<id>``) says ``{state: sent}`` though minitask never
sent it (a marker planted, or left by data minitask did not write) was never sent, and
the chain's handle answered "unknown" for ever (``get()`` timed out). The step now ends
cancelled, naming its marker, and so does what follows it; nothing is sent twice. A
real sent step is still never sent again when the step before runs again (at least
once), whether it is queued, finished, or ran keeping no result. A real worker process
and a test-owned redis-server."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask, TaskFailed, chain, chord
from minitask.stores.workflow_reads import frame_of
from minitask.wire.message import wall_ms
from minitask.wire.serializer import decode_message
from tests.support.lost_steps import (  # noqa: F401 (producer, server: fixtures)
    DEADLINE, KEYS, forge_sent, lost_worker, producer, server)
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_forged_sent_marker_ends_the_step_and_the_chain_cancelled_naming_it(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        tmp_path: Path) -> None:
    client = server.client()
    add = producer.tasks["add"]
    handle = chain(add.si(1, 1), add.s(2).set(task_id="lost-2"), add.s(3)).delay()
    marker = forge_sent(client, "lost-2")
    log = tmp_path / "worker.log"
    worker = lost_worker(processes, server, log)
    with pytest.raises(TaskFailed) as ended:
        handle.get(timeout=DEADLINE)
    said = str(ended.value)
    assert marker in said and "says it was sent" in said, said
    assert ended.value.task_id == "lost-2"
    assert handle.status() == "cancelled"
    step = producer.handle("lost-2")
    assert step.status() == "cancelled"
    with pytest.raises(TaskFailed, match=marker):
        step.get(timeout=1)
    # never sent: no message, and the marker left as it was
    assert client.hexists(KEYS.messages, "lost-2") == 0
    assert client.hget(marker, "state") == b"sent"
    stop_worker(worker, log)
    assert marker in log.read_text(errors="replace")


def test_the_forged_step_last_in_its_chain_ends_cancelled_naming_it(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        tmp_path: Path) -> None:
    client = server.client()
    add = producer.tasks["add"]
    handle = chain(add.si(1, 1), add.s(2).set(task_id="lost-last")).delay()
    marker = forge_sent(client, "lost-last")
    log = tmp_path / "worker.log"
    worker = lost_worker(processes, server, log)
    with pytest.raises(TaskFailed, match=marker):
        handle.get(timeout=DEADLINE)
    assert handle.status() == "cancelled"
    stop_worker(worker, log)


@pytest.mark.parametrize("kind", ["flow spec", "chord member"])
def test_a_forged_marker_on_a_limited_step_or_a_chord_member_ends_it_too(
        kind: str, processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811
        tmp_path: Path) -> None:
    """The same through spawn_flow.lua (a step with limits) and spawn_group.lua (a chord
    sent by the step before it): the chord's body ends cancelled, its group failed."""
    client = server.client()
    add, limited, total = (producer.tasks[name] for name in ("add", "limited_add", "total"))
    if kind == "flow spec":
        handle = chain(add.si(1, 1), limited.s(2).set(task_id="lost-f"), add.s(3)).delay()
        lost = "lost-f"
    else:
        handle = chain(add.si(1, 1), chord([add.s(1).set(task_id="lost-m"), add.s(2)],
                                           total.s())).delay()
        lost = "lost-m"
    marker = forge_sent(client, lost)
    log = tmp_path / "worker.log"
    worker = lost_worker(processes, server, log)
    with pytest.raises(TaskFailed) as ended:
        handle.get(timeout=DEADLINE)
    assert marker in str(ended.value) and ended.value.task_id == lost, str(ended.value)
    assert producer.handle(lost).status() == "cancelled"
    assert client.hexists(KEYS.messages, lost) == 0
    stop_worker(worker, log)


def _first_frame(client: Any, task_id: str) -> Any:
    body = client.hget(KEYS.messages, task_id)
    assert body is not None
    return frame_of(decode_message(body))


def test_a_real_sent_step_is_never_sent_again_nor_cancelled(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        tmp_path: Path) -> None:
    """The step before a sent step runs again (delivered again after a crash): the sent
    step is left as it is, queued, finished, or finished keeping no result."""
    client = server.client()
    add, quiet = producer.tasks["add"], producer.tasks["quiet_add"]
    queued = chain(add.si(1, 1).set(task_id="q-1"), add.s(2).set(task_id="q-2"),
                   add.s(3).set(task_id="q-3")).delay()
    frame = _first_frame(client, "q-1")
    workflows = producer.broker.workflows
    workflows.advance(frame, 2, wall_ms())  # q-1 ended: q-2 sent
    body = client.hget(KEYS.messages, "q-2")
    assert body is not None
    workflows.advance(frame, 2, wall_ms())  # q-1 again: q-2 is queued, left alone
    assert client.hget(KEYS.messages, "q-2") == body
    assert client.exists(KEYS.result("q-2"), KEYS.result("q-3")) == 0
    assert client.hget(KEYS.once("q-3"), "state") is None  # reserved only, not cancelled
    assert producer.handle("q-2").status() == "queued"

    done = chain(add.si(1, 1).set(task_id="d-1"), add.s(2).set(task_id="d-2"),
                 add.s(3).set(task_id="d-3")).delay()
    quiet_chain = chain(add.si(1, 1).set(task_id="i-1"), quiet.s(2).set(task_id="i-2"),
                        add.s(3).set(task_id="i-3")).delay()
    frames = {"d-1": _first_frame(client, "d-1"), "i-1": _first_frame(client, "i-1")}
    log = tmp_path / "worker.log"
    worker = lost_worker(processes, server, log)
    assert queued.get(timeout=DEADLINE) == 7
    assert done.get(timeout=DEADLINE) == 7
    assert quiet_chain.get(timeout=DEADLINE) == 7
    stop_worker(worker, log)
    assert client.exists(KEYS.result("i-2")) == 0  # ran, keeping no result: nowhere
    before = {i: client.lrange(KEYS.result(i), 0, -1) for i in ("d-2", "d-3", "i-3")}
    workflows.advance(frames["d-1"], 2, wall_ms())  # delivered again after the chain ended
    workflows.advance(frames["i-1"], 2, wall_ms())
    assert {i: client.lrange(KEYS.result(i), 0, -1) for i in before} == before
    assert client.exists(KEYS.result("i-2")) == 0  # nothing written for it
    assert client.hexists(KEYS.messages, "d-2") == 0 and client.hexists(KEYS.messages, "i-2") == 0
    assert done.get(timeout=1) == 7 and quiet_chain.get(timeout=1) == 7
