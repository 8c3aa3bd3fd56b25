"""An app whose tasks fork: the child writes its pid to a file, then leaves the task's
code as ``how`` says (``sys.exit(0)``, ``sys.exit(3)``, a return, a raise, a return
after reading its own pid); the parent
waits for it and returns the child's exit code. Plain and ``async def`` forms; and a
``task_postrun`` hook that forks for ``hook_forks``, its child returning into the
worker's code. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import os
import sys
from typing import Any, Tuple

from minitask import Minitask, TaskContext

app = Minitask("forking")


def _child(path: str, how: str) -> str:
    """In the forked child: the work (its pid in ``path``), then leave as ``how`` says."""
    with open(path, "w") as out:
        out.write(str(os.getpid()))
    if how == "exit0":
        sys.exit(0)
    if how == "exit3":
        sys.exit(3)
    if how == "raises":
        raise ValueError("raised in the forked child")
    if how == "reads_pid":  # as a Redis call of its own would (``Connections.own``): the
        from minitask.broker.connections import current_pid  # fork mark set again,
        current_pid()  # ``PID_SEEN`` the copy's own id
    return "the child's value"  # "returns": the child leaves the task by its return


def _parent(pid: int) -> Tuple[str, int]:
    _, status = os.waitpid(pid, 0)
    return "parent", os.waitstatus_to_exitcode(status)


@app.task(retries=0, name="forks")
def forks(path: str, how: str) -> Any:
    pid = os.fork()
    if pid == 0:
        return _child(path, how)
    return _parent(pid)


@app.task(retries=0, name="aforks")
async def aforks(path: str, how: str) -> Any:
    pid = os.fork()
    if pid == 0:
        return _child(path, how)
    return _parent(pid)


@app.task(name="ok")
def ok(x: int) -> int:
    return x


@app.task(retries=0, name="hook_forks")
def hook_forks(path: str) -> str:
    return path


def _postrun(context: TaskContext, status: str, outcome: Any) -> None:
    """For ``hook_forks``: fork; the child writes its pid to the path the task returned
    and returns, as the parent waits for it."""
    if context.name != "hook_forks" or status != "succeeded":
        return
    pid = os.fork()
    if pid == 0:
        with open(outcome, "w") as out:
            out.write(str(os.getpid()))
        return
    os.waitpid(pid, 0)


app.on("task_postrun", _postrun)
