"""An app whose lifecycle hooks fork: for task ``<event>_forks`` (``a<event>_forks``: its
``async def`` form) the ``task_<event>`` hook forks; the child writes its pid to
``$HOOK_FORK_DIR/<task id>`` and returns into the worker's code, as the parent waits for
it (``os.waitpid``). Every run of a task's code appends ``<task id> <pid>`` to
``$HOOK_FORK_DIR/runs``. ``failure_forks`` raises: its ``task_failure`` hook runs where
failures are recorded (a recording thread, on the asyncio pool). The broker comes from
MINITASK_BROKER_URL."""
from __future__ import annotations

import os
from typing import Any

from minitask import Minitask, TaskContext, current_task

app = Minitask("hook_forking")

#: The hooks that fork, each for the task named after it.
EVENTS = ("start", "prerun", "success", "postrun", "failure")


def _ran() -> int:
    """A run of a task's code, written down: by task id and pid; the pid."""
    task = current_task()
    assert task is not None
    with open(os.path.join(os.environ["HOOK_FORK_DIR"], "runs"), "a") as out:
        out.write(f"{task.id} {os.getpid()}\n")
    return os.getpid()


def _plain() -> int:
    return _ran()


async def _coroutine() -> int:
    return _ran()


def _fails() -> None:
    _ran()
    raise ValueError("failure_forks fails, as asked")


for _event in ("start", "prerun", "success", "postrun"):
    app.task(retries=0, name=f"{_event}_forks")(_plain)
    app.task(retries=0, name=f"a{_event}_forks")(_coroutine)
app.task(retries=0, name="failure_forks")(_fails)


@app.task(name="ok")
def ok(x: int) -> int:
    return x


def _fork_for(event: str, context: TaskContext) -> None:
    if context.name not in (f"{event}_forks", f"a{event}_forks"):
        return
    pid = os.fork()
    if pid == 0:
        with open(os.path.join(os.environ["HOOK_FORK_DIR"], context.id), "w") as out:
            out.write(str(os.getpid()))
        return  # the child returns into the worker's code
    os.waitpid(pid, 0)


def _hook(event: str) -> Any:
    return lambda context, *_: _fork_for(event, context)


for _event in EVENTS:
    app.on(f"task_{_event}", _hook(_event))
