"""What Python itself writes to a worker's stderr on behalf of a task's code goes through
the worker's log, escaped: an exception in a thread a task started
(``threading.excepthook``), a warning (``warnings.showwarning``) and an exception
ignored in ``__del__`` (``sys.unraisablehook``) were written raw, so their texts could
forge log lines and move the terminal (issue 29, a low finding of the last probe).
Each is now one log record, naming the task where it is known, on every pool."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

import tests.apps.stray_lines as stray_app
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer, module_app_on

pytestmark = pytest.mark.integration

APP = "tests.apps.stray_lines"
FORGED = stray_app.FORGED


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with module_app_on(redis_server, monkeypatch, stray_app.app) as served:
        yield served


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_stray_output_of_task_code_is_logged_escaped_naming_the_task(
        pool: str, url: str, processes: Processes, tmp_path: Path) -> None:
    handles = [stray_app.threaded.delay(), stray_app.warned.delay(), stray_app.awarned.delay(),
               stray_app.unraisable.delay()]
    log = tmp_path / "worker.log"
    worker = processes.worker(APP, "--pool", pool, "--burst", env={"MINITASK_BROKER_URL": url},
                              log=log)
    assert exit_code(worker) == 0
    text = log.read_bytes().decode("utf-8", "replace")
    for what in ("by a thread's exception", "by a thread name", "by a warning",
                 "by an async task's warning", "by __del__"):
        assert what in text, (what, text)  # each was said
    lines = text.splitlines()
    assert not [line for line in lines if line.startswith(FORGED)], text
    assert "\x1b" not in text and "\r" not in text, text
    # each is a log line of the worker's format, naming the task where it is known
    warned = next(line for line in lines if "by a warning" in line)
    assert f"[warned {handles[1].id}]" in warned and " WARNING " in warned, warned
    awarned = next(line for line in lines if "by an async task's warning" in line)
    assert f"[awarned {handles[2].id}]" in awarned and "RuntimeWarning" in awarned, awarned
    thread = next(line for line in lines if "by a thread name" in line)
    assert " ERROR " in thread and "exception in thread" in thread, thread
    assert all(handle.get(timeout=10) == "done" for handle in handles)
