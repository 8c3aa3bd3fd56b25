"""A prefetched task taken from a worker's buffer is never dropped by a schedule read
that fails as it is handed out (real redis-server).

The tick source takes the next buffered task, then reads the schedules when that is
due. A read that met a killed connection raised out of the fetch with the task taken:
neither run nor buffered, it stayed in the worker's holdings, whose heartbeat renewed
its lease for as long as the worker lived; it never ran (the asyncio pool's
killed-connections drain: one task leased for ever, 1 run in ~12). It now goes back
to the head of the buffer, and the next fetch hands it out.
"""
from __future__ import annotations

from typing import Any, List, Optional

import pytest

from minitask import Minitask
from minitask.errors import BrokerError
from minitask.stores.schedules import ScheduleStore
from minitask.worker import ticks

pytestmark = [pytest.mark.integration, pytest.mark.app("keptbuffer", on="server", prefetch=3)]


def test_a_task_taken_as_the_schedule_read_fails_is_handed_out_next(
        app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    @app.task
    def noop(index: int) -> int:
        return index

    sent = [noop.delay(index).id for index in range(3)]
    worker = app.worker(pool="thread", concurrency=1)
    monkeypatch.setattr(ticks, "REFRESH_MS", 0)  # each fetch reads the schedules
    failures: List[int] = []
    real = ScheduleStore.armed

    def armed(self: ScheduleStore, *args: Any, **kwargs: Any) -> Any:
        if failures:  # (once: the connection killed under that read)
            failures.pop()
            raise BrokerError("could not read the schedules: Connection closed by server.",
                              reason="unreachable")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ScheduleStore, "armed", armed)
    first = worker.fetch()  # leases all three: the first in hand, two buffered
    assert first is not None
    handed = [first.task_id]
    failures.append(1)
    assert worker.follow_on() is None  # the read failed as the second was taken
    for _ in range(4):
        job: Optional[Any] = worker.fetch()
        if job is not None:
            handed.append(job.task_id)
    held = {task_id for task_id, _ in worker._holdings.held()}
    assert sorted(handed) == sorted(sent), f"handed out {handed}; held, never run: {held}"
    app.broker.close()
