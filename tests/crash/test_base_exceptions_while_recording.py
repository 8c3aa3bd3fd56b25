"""A BaseException the app's own code raises while a worker records an attempt's outcome
(a registered type's encode function on the return value; an exception whose text
cannot be read) is that attempt's failure on every pool: recorded with its type,
retried or dead-lettered by the task's options, no lease left, and the pool runs the
tasks after it. Before, the thread pool left such a task leased "running" for ever
(the recording thread gave up on it), the process pool's child died on it again and
again, and the asyncio pool recorded the SystemExit of a __str__ as the task's error."""
from __future__ import annotations

import signal
from typing import Dict, Iterator, Tuple

import pytest

from minitask import Minitask, TaskFailed
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash

DEADLINE = 60.0
UNREADABLE = "its text could not be read"
#: task -> (exc_type, words its dead letter's message or reason must hold, attempts)
EXPECTED: Dict[str, Tuple[str, Tuple[str, ...], int]] = {
    "encode_interrupt": ("KeyboardInterrupt", ("cannot be encoded", "KeyboardInterrupt"), 1),
    "encode_exit": ("SystemExit", ("cannot be encoded", "SystemExit"), 1),
    "encode_own": ("Mine", ("cannot be encoded", "Mine"), 1),
    "text_exits": ("TextExits", (UNREADABLE, "SystemExit"), 1),
    "text_interrupts": ("TextInterrupts", (UNREADABLE, "KeyboardInterrupt"), 2),  # retried
    "text_fails": ("TextFails", (UNREADABLE, "ValueError"), 1),
    "repr_interrupts": ("ValueError", (UNREADABLE, "KeyboardInterrupt"), 1),
    "prying": ("Prying", ("its traceback cannot be formatted",), 1),
    "async_text_exits": ("TextExits", (UNREADABLE, "SystemExit"), 1),
}


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Minitask]:
    """The app of tests.apps.recording on the test's side (the crash tests' ``server``)."""
    import tests.apps.recording as recording
    app = Minitask("recording", broker=server.client())
    for task in recording.app.tasks.values():
        app.task(name=task.name, retries=task.options.retries)(task.func)
    yield app
    app.close()


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_base_exception_while_recording_is_the_attempts_failure_and_the_pool_runs_on(
        processes: Processes, server: RedisServer, producer: Minitask, pool: str) -> None:
    worker = processes.worker("tests.apps.recording", "--pool", pool, "-c", "2",
                              env={"MINITASK_BROKER_URL": server.url})
    failing = {name: producer.tasks[name].delay() for name in EXPECTED}
    after = [producer.tasks["double"].delay(n) for n in range(10)]
    assert [handle.get(timeout=DEADLINE) for handle in after] == [2 * n for n in range(10)]
    for name, (exc_type, _, _) in EXPECTED.items():
        with pytest.raises(TaskFailed) as failed:
            failing[name].get(timeout=DEADLINE)
        assert failed.value.exc_type == exc_type, name
        assert failing[name].status() == "failed", name
    dead = {letter.task_id: letter for letter in producer.dead_letters()}
    assert set(dead) == {handle.id for handle in failing.values()}
    for name, (exc_type, words, attempts) in EXPECTED.items():
        letter = dead[failing[name].id]
        said = f"{letter.reason} | {letter.message}"
        assert letter.exc_type == exc_type, (name, said)
        assert all(word in said for word in words), (name, said)
        assert letter.attempts == attempts, (name, letter.attempts)
        assert exc_type in letter.traceback, (name, letter.traceback)
    assert producer.broker.queues.counts("default")["running"] == 0  # no lease left
    # the pool still serves, and a real signal still stops it gracefully
    assert producer.tasks["double"].delay(21).get(timeout=DEADLINE) == 42
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
