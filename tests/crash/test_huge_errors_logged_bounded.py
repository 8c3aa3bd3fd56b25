"""A task raising an exception with a 5 MB message is logged bounded, on every pool: the
worker's line about its dead letter keeps at most 64 kB of the message and 128 kB of
the traceback (head and tail, saying how much was cut), as the dead letter itself does,
and so does the line about its ``task_failure`` hook raising one as big. Before, the
worker logged with ``exc_info``: each attempt wrote the whole message twice over (the
line and the traceback's last line), 10 MB and more."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Iterator

import pytest

from minitask import Minitask, TaskFailed
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 60.0
#: What the worker may write for one attempt that failed with a 5 MB message, its
#: dead letter and its hook's failure (about 192 kB each) and its other lines.
MOST_BYTES = 2 * 200_000 + 20_000


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    import tests.apps.huge_errors as huge
    app = Minitask("huge", broker=server.client())
    for task in huge.app.tasks.values():
        app.task(name=task.name, retries=0)(task.func)
    yield app
    app.close()


@pytest.mark.parametrize("pool,task", [("thread", "plain_huge"), ("process", "plain_huge"),
                                       ("asyncio", "async_huge")])
def test_a_5_mb_error_message_is_logged_bounded(
        processes: Processes, server: RedisServer, producer: Minitask, tmp_path: Path,
        pool: str, task: str) -> None:
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.huge_errors", "--pool", pool, "-c", "1",
                              env={"MINITASK_BROKER_URL": server.url}, log=log)
    handle = producer.tasks[task].delay()
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=DEADLINE)
    assert failed.value.exc_type == "ValueError"
    deadline = time.monotonic() + DEADLINE  # the hook's line comes after the outcome
    while "for task_failure raised" not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the hook's failure was never logged"
        time.sleep(0.1)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    written = log.read_bytes()
    print(f"{pool}: the worker logged {len(written):,} bytes")
    assert len(written) < MOST_BYTES, f"the worker logged {len(written):,} bytes"
    text = written.decode(errors="replace")
    assert "is dead" in text and "Traceback (most recent call last)" in text
    # the dead letter's line: the message cut, then its traceback; the hook's traceback
    assert "[cut: 5,000,000 characters in all]" in text
    assert text.count(" characters in all] ") == 3, "each cut says how much was cut"
