"""A workflow whose step is given an explicit task id that a step of an earlier
workflow took (its marker lives as long as its result) is refused at ``delay()``,
naming the id: that step would never be sent, its group never fill, and the chord
body (or the group's next step) waiting for it would stay pending for ever. Ids no
step took go through as ever. Real worker processes on a test-owned redis-server."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from minitask import ConfigurationError, Minitask, chain, chord, group
from tests.support.processes import Processes
from tests.support.reused_ids import (  # noqa: F401
    DEADLINE, producer, reused_worker, server, stop_worker)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def _chord(app: Minitask, member_id: str) -> Any:
    add, total = app.tasks["add"], app.tasks["total"]
    return chord(group(add.si(1, 2).set(task_id=member_id), add.si(3, 4)), total.s())


def _two_groups(app: Minitask, member_id: str) -> Any:
    """A group whose results flow to a second group: the second's member has the id."""
    add, total = app.tasks["add"], app.tasks["total"]
    return chain(group(add.si(1, 2), add.si(3, 4)),
                 group(total.s().set(task_id=member_id), total.s()))


@pytest.mark.parametrize("shape", [_chord, _two_groups])
def test_an_id_a_step_of_an_earlier_workflow_took_is_refused_at_delay(
        processes: Processes, server: RedisServer, producer: Minitask,  # noqa: F811 (imported)
        tmp_path: Path, shape: Callable[[Minitask, str], Any]) -> None:
    log = tmp_path / "worker.log"
    worker = reused_worker(processes, server, log, "-c", "2")
    first = shape(producer, "member-1").delay()
    assert first.get(timeout=DEADLINE) in (10, [10, 10])
    with pytest.raises(ConfigurationError) as refused:
        shape(producer, "member-1").delay()
    assert "'member-1'" in str(refused.value) and "never be sent" in str(refused.value)
    other = shape(producer, "member-2").delay()  # an id no step took: as ever
    assert other.get(timeout=DEADLINE) in (10, [10, 10])
    assert worker.poll() is None
    stop_worker(worker, log)
