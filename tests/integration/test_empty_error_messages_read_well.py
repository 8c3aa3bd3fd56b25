"""An exception with no message reads in the worker's log as ``TaskFailed`` words it:
its type alone (issue 29, probe29p LOW: ``GeneratorExit: ;`` in the worker's dead line,
``(ValueError: )`` in its retry line; trial34: ``GeneratorExit: failed``, its reason
in the message's place, which read as the task's own text). Real worker processes of
tests/apps/silent_errors.py on the suite's redis-server, on the asyncio and thread
pools; the log is read."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minitask import Minitask, TaskFailed
from tests.support.processes import Processes
from tests.support.reused_ids import stop_worker
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DEADLINE = 60.0


@pytest.mark.parametrize("pool, task, kind, reason", [
    ("asyncio", "async_silent", "GeneratorExit", "failed"),
    ("thread", "plain_silent", "ValueError", "out of attempts")])
def test_an_error_with_no_message_reads_as_task_failed_words_it(
        redis_server: RedisServer, admin: Any, processes: Processes, tmp_path: Path,
        pool: str, task: str, kind: str, reason: str) -> None:
    import tests.apps.silent_errors as silent
    app = Minitask("silent_errors", broker=redis_server.url)
    for registered in silent.app.tasks.values():
        app.task(name=registered.name, retries=registered.options.retries,
                 retry_backoff=registered.options.retry_backoff)(registered.func)
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.silent_errors", "--pool", pool,
                              env={"MINITASK_BROKER_URL": redis_server.url}, log=log)
    try:
        handle = app.tasks[task].delay()
        with pytest.raises(TaskFailed) as failed:
            handle.get(timeout=DEADLINE)
    finally:
        app.close()
        stop_worker(worker, log)
    assert str(failed.value) == f"task {handle.id} failed: {kind}"
    text = log.read_text(errors="replace")
    assert f"{kind}: ;" not in text and f"({kind}: )" not in text, text[-3000:]
    assert (f"task {handle.id} {task} is dead ({reason} after " in text
            and f"): {kind}; see minitask dead show -A APP {handle.id}" in text), \
        text[-3000:]
    if reason == "out of attempts":
        assert f"task {handle.id} {task} failed on attempt 1 ({kind}) in " in text, text[-3000:]
