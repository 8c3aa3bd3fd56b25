"""Reading what workflows leave in Redis: handle records and the state of steps.

``WorkflowStore`` (``workflows.py``) writes them as workflows start and go on; a
handle rebuilt in another process reads them here.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ..broker.packing import ScriptCall
from ..broker.transport import text
from ..errors import DecodeError
from ..wire.serializer import unpack_data
from .foreign import ignored, raise_refusals, text_of
from .store import Store


def handle_record_of(key: str, data: Any) -> Any:
    """A handle record as read from ``key``: None when there is none, or when the key
    holds what minitask did not write (another type, other bytes), said once."""
    if isinstance(data, Exception):
        ignored(key, f"it holds another type than a string ({data})")
        return None
    if not isinstance(data, bytes):
        return None
    try:
        return unpack_data(data, f"the handle record {key}")
    except DecodeError as exc:
        ignored(key, str(exc))
        return None


class WorkflowReads(Store):
    """What a handle reads of a workflow, and the one record it drops."""

    def handle_record(self, some_id: str, queues: Sequence[str]) -> Any:
        """The handle record ``start`` wrote for ``some_id`` under one of ``queues``,
        unpacked, or None when there is none (never written, or expired), in one round
        trip where the connection allows. A key minitask did not write (another type,
        other bytes) counts as none, said once."""
        return self._first_record([self.keys(queue).handle(some_id) for queue in queues],
                                  f"read the handle record of {some_id}")

    def plan_record(self, workflow_id: str, queues: Sequence[str]) -> Any:
        """The plan record (plans.py) ``start`` wrote for ``workflow_id`` under one of
        ``queues``, unpacked, or None, as ``handle_record`` reads it."""
        return self._first_record([self.keys(queue).workflow(workflow_id)
                                   for queue in queues],
                                  f"read the plan of workflow {workflow_id}")

    def workflow_of(self, queue: str, task_id: str) -> str:
        """The id of the workflow whose step ``task_id`` (of ``queue``) is, as its marker
        names it; '' when it is none's (a plain task, or a step of an older minitask)."""
        key = self.keys(queue).once(task_id)
        with self.transport.errors(f"read the workflow of {task_id}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.hget(key, "w")
            found = pipe.execute(raise_on_error=False)[0]
        raise_refusals([found])
        if isinstance(found, Exception):
            ignored(key, f"it holds another type than a hash ({found})")
        return text_of(found) or "" if isinstance(found, bytes) else ""

    def _first_record(self, keys: List[str], doing: str) -> Any:
        """The first of ``keys`` that holds a record minitask wrote, unpacked, or None,
        in one round trip where the connection allows."""
        if not keys:
            return None
        with self.transport.errors(doing):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in keys:
                pipe.get(key)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        for key, data in zip(keys, replies):
            record = handle_record_of(key, data)
            if record is not None:
                return record
        return None

    def drop_handle_record(self, some_id: str, queues: Sequence[str]) -> None:
        """Delete the handle record of ``some_id`` under each of ``queues`` (one key
        per command: each under its own tag). Once the task it promises is forgotten,
        it would have ``get()`` wait for a result that will never come."""
        keys = [self.keys(queue).handle(some_id) for queue in queues]
        if not keys:
            return
        with self.transport.errors(f"delete the handle record of {some_id}"):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in keys:
                pipe.delete(key)
            pipe.execute()

    def states(self, tasks: Sequence[Tuple[str, str]]) -> List[Tuple[str, Optional[bytes]]]:
        """Where each (queue, task id) is, as ``ResultStore.state`` says, in one round
        trip where the connection allows."""
        calls: List[ScriptCall] = []
        for queue, task_id in tasks:
            k = self.keys(queue)
            calls.append(("state", queue, (k.leases, k.delayed, k.retrying, k.dead,
                                           k.messages), (k.result(task_id), task_id), 1))
        replies = self.transport.run_calls(calls, f"read the state of {len(calls)} task(s)")
        return [(text(state), outcome or None) for state, outcome in replies]
