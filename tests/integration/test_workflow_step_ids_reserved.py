"""Two pending workflows may not give the same explicit task id to steps neither has
sent yet (issue 29, a low finding of probe 29e): nothing in Redis said the id was
taken, both were accepted, and the second's step was never sent (its marker existed),
so what waited for it stayed pending for ever. A workflow now reserves its explicit
ids as it is sent (step_ids.lua: the step's marker, with no state); the second is
refused at ``delay()`` naming the id and the first workflow, with nothing written.
A real worker process on a test-owned redis-server."""
from __future__ import annotations

from pathlib import Path
import pytest

from minitask import ConfigurationError, MessageTooLarge, Minitask, chain, group
from tests.support.processes import Processes
from tests.support.reused_ids import (  # noqa: F401
    DEADLINE, KEYS, OTHER, producer, reused_worker, server, stop_worker)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_pending_step_id_is_refused_to_a_second_workflow_and_the_first_runs(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        tmp_path: Path) -> None:
    client = server.client()
    add, total = producer.tasks["add"], producer.tasks["total"]
    # neither sends its step "shared" before its first step ran (no worker yet)
    first = chain(add.si(1, 2), add.s(3).set(task_id="shared")).delay()
    messages = client.hlen(KEYS.messages)
    with pytest.raises(ConfigurationError) as refused:
        chain(add.si(5, 6), group(total.s().set(task_id="free", queue="other"),
                                  add.s(7).set(task_id="shared"))).delay()
    said = str(refused.value)
    assert "'shared'" in said and first.id in said and "never be sent" in said, said
    assert "'free'" not in said
    assert client.hlen(KEYS.messages) == messages  # nothing of the second was sent
    assert client.exists(OTHER.once("free")) == 0  # reserved in its queue, released
    # a lone step is sent at once: its id is checked (refused here), never reserved
    with pytest.raises(ConfigurationError, match="'shared'"):
        add.si(1, 1).set(task_id="shared").delay()
    lone = add.si(1, 1).set(task_id="lone").delay()
    assert client.hgetall(KEYS.once("lone")) == {b"state": b"sent"}  # no workflow named
    # a workflow that fails to send releases its ids: they can be sent again
    with pytest.raises(MessageTooLarge):
        chain(add.si(1, 1).set(task_id="big"), add.s("x" * 2_000_000)).delay()
    assert client.exists(KEYS.once("big")) == 0
    log = tmp_path / "worker.log"
    worker = reused_worker(processes, server, log, "-c", "2", "-Q", "default,other")
    assert first.get(timeout=DEADLINE) == 6  # its reserved step was sent over it
    assert lone.get(timeout=DEADLINE) == 2
    assert chain(add.si(1, 1).set(task_id="big"), add.s(2)).delay().get(
        timeout=DEADLINE) == 4
    stop_worker(worker, log)
