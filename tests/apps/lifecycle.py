"""An app for the lifecycle hook and recycling tests' subprocess workers (broker from
MINITASK_BROKER_URL). Its hooks and tasks leave marks in Redis, each with the pid of
the process that wrote it:

* ``hooks:init``, ``hooks:ready``, ``hooks:shutdown``: ``pid`` (and the thread
  name for ``init``), once per call of that hook;
* ``hooks:prerun:<id>``: ``pid:attempt:current`` (current: whether
  ``current_task()`` is the hook's context); ``hooks:postrun:<id>``:
  ``pid:attempt:current:status:outcome`` (the value's repr or the exception's type);
* ``runs:<id>``: ``pid`` per run of a task; ``runs`` (a hash): task id -> runs;
* ``rss`` (a sorted set): ``id:pid`` -> the child's resident MB after a ``leak``.

``LIFECYCLE_INIT_FAILS``: ``all`` makes every worker_process_init raise, ``first``
only the first one. ``LIFECYCLE_HOOKS_EXIT`` set: task_prerun and task_postrun
raise ``SystemExit`` once they left their mark.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional

import redis

from minitask import Minitask, TaskContext, Worker, current_task
from minitask.worker.pools.recycling import MB, resident_bytes

app = Minitask("lifecycle", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "3")))

_clients: Dict[int, "redis.Redis[bytes]"] = {}
#: What leak() keeps, for ever: the memory a leaking task never gives back.
_kept: List[bytes] = []


def _client() -> "redis.Redis[bytes]":
    """One client per process: a forked child makes its own."""
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    return _clients[pid]


def _on_init(worker: Worker) -> None:
    _client().rpush("hooks:init", f"{os.getpid()}:{threading.current_thread().name}")
    fails = os.environ.get("LIFECYCLE_INIT_FAILS", "")
    if fails == "all" or (fails == "first" and _client().incr("hooks:init_count") == 1):
        raise RuntimeError("no database for this child")


def _on_ready(worker: Worker) -> None:
    _client().rpush("hooks:ready", f"{os.getpid()}:{worker.pool}")


def _on_shutdown(worker: Worker) -> None:
    _client().rpush("hooks:shutdown", f"{os.getpid()}:{worker.pool}")


def _on_prerun(context: TaskContext) -> None:
    current = current_task() is context
    _client().rpush(f"hooks:prerun:{context.id}", f"{os.getpid()}:{context.attempt}:{current}")
    if os.environ.get("LIFECYCLE_HOOKS_EXIT"):
        raise SystemExit(3)


def _on_postrun(context: TaskContext, status: str, outcome: Any) -> None:
    current = current_task() is context
    shown = type(outcome).__name__ if isinstance(outcome, BaseException) else repr(outcome)
    _client().rpush(f"hooks:postrun:{context.id}",
                    f"{os.getpid()}:{context.attempt}:{current}:{status}:{shown}")
    if os.environ.get("LIFECYCLE_HOOKS_EXIT"):
        raise SystemExit(4)


app.on("worker_process_init", _on_init)
app.on("worker_ready", _on_ready)
app.on("worker_shutdown", _on_shutdown)
app.on("task_prerun", _on_prerun)
app.on("task_postrun", _on_postrun)


def _ran() -> str:
    context = current_task()
    assert context is not None
    pipe = _client().pipeline(transaction=False)
    pipe.rpush(f"runs:{context.id}", os.getpid())
    pipe.hincrby("runs", context.id, 1)
    pipe.execute()
    return context.id


@app.task
def work(index: int) -> int:
    _ran()
    return index


@app.task(retries=1, retry_backoff=0.01, retry_backoff_max=0.01, retry_on=(ValueError,))
def fail(index: int) -> None:
    _ran()
    raise ValueError(f"fail {index}")


@app.task
def leak(index: int, megabytes: float) -> Optional[int]:
    """Keep ``megabytes`` MB for ever (written, so resident), note the child's size."""
    task_id = _ran()
    _kept.append(b"\x01" * int(megabytes * MB))
    _client().zadd("rss", {f"{task_id}:{os.getpid()}": resident_bytes() / MB})
    return index
