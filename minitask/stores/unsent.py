"""Cancelling a workflow step its workflow has not sent yet.

A chain's later step, or a chord's body, is sent only when the steps before it end
(``stores/workflows.py``); until then no message of it exists, and ``cancel()`` had
nothing to withdraw: it answered False, and the step ran later all the same. Now
``cancel_unsent.lua`` writes the step's marker (``once:<id>``) as ``cancelled`` and its
cancelled outcome: spawn.lua never sends a step whose marker holds a state, so the
step never runs, its status reads ``cancelled`` and ``get()`` raises ``TaskFailed``
(exc_type ``Cancelled``), as for a withdrawn queued step. The worker whose spawn skips
it (the step before it ended) has what follows it, and cancels that too
(``stop_cancelled``): a chain's later steps end cancelled, its group fails, instead
of waiting for ever. A step sent already is left as it is, and ``cancel()`` goes on
to withdraw it as a queued task: the marker says sent first (both scripts run whole
in the queue's slot), so a step is never both sent and reported cancelled.

A step is known to be a workflow's (no stray id is marked) by the handle made with
it (``StepHandle``), by the handle record its workflow wrote (``app.handle`` of a
chain's last step or a chord's body), or by the marker its workflow reserved for an
explicit ``task_id``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..broker.transport import Transport
from ..errors import DecodeError
from ..wire.message import Outcome, wall_ms
from ..wire.serializer import encode_outcome
from .foreign import raise_refusals
from .store import Store
from .workflow_reads import Failure, WorkflowReads, promised_queue

#: What a step cancelled before it was sent says (its outcome, and the steps after it).
UNSENT = "cancelled before it started (its workflow had not sent it yet)"


class UnsentSteps(Store):
    """Cancelling workflow steps not sent yet."""

    scripts = ("cancel_unsent",)

    def __init__(self, transport: Transport, app_name: str, reads: WorkflowReads) -> None:
        super().__init__(transport, app_name)
        self._reads = reads

    def cancel(self, task_id: str, queue: Optional[str], promised: bool, ttl_ms: int,
               queues: Callable[[], Sequence[str]]) -> Tuple[bool, Optional[str]]:
        """Cancel step ``task_id`` of ``queue`` (None: unknown, looked for among
        ``queues()``) if its workflow has not sent it; ``promised``: a handle made with
        its workflow says it is a step. Returns whether it was cancelled (it will never
        run), and its queue (None: no step of this id is known): a step sent already
        is that queue's to withdraw.

        Only a step may be unsent: a task found in a queue, no step, was sent.

        Raises:
            BrokerError: Redis failed.
        """
        if queue is not None and not promised:
            return False, queue
        if queue is None:
            queue, promised = self._find(task_id, queues())
            if queue is None:
                return False, None
        k = self.keys(queue)
        outcome = encode_outcome(Outcome("cancelled", wall_ms(), exc_type="Cancelled",
                                         message=UNSENT))
        done = self.transport.run("cancel_unsent", (k.once(task_id), k.result(task_id),
                                                    k.messages),
                                  (task_id, outcome, ttl_ms, "1" if promised else "0"),
                                  f"cancel {task_id}, a workflow step not sent yet")
        return bool(done), queue

    def marked(self, queue: str, task_id: str) -> bool:
        """Whether step ``task_id``'s marker says it was sent (or cancelled before it
        was): read before its state, a step unknown then ran and is gone (its result
        expired or forgotten), no step waiting to be sent. A marker with no state (a
        reservation), none, or one minitask did not write (another type, another state)
        tells nothing.

        Raises:
            BrokerError: Redis failed.
        """
        with self.transport.errors(f"read the marker of workflow step {task_id}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.hget(self.keys(queue).once(task_id), "state")
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        return replies[0] in (b"sent", b"cancelled")

    def _find(self, task_id: str, queues: Sequence[str]) -> Tuple[Optional[str], bool]:
        """The queue a handle record promises ``task_id`` to (and True), else the queue
        whose marker its workflow reserved (and False: the script wants the marker)."""
        try:
            queue = promised_queue(self._reads.handle_record(task_id, queues))
        except DecodeError:  # a record no minitask wrote (said): it promises nothing
            queue = None
        if queue is not None or not queues:
            return queue, queue is not None
        with self.transport.errors(f"look for workflow step {task_id}"):
            pipe = self.transport.client.pipeline(transaction=False)
            for name in queues:
                pipe.hexists(self.keys(name).once(task_id), "w")
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        found = [name for name, reply in zip(queues, replies) if reply is True or reply == 1]
        return (found[0] if found else None), False


def stop_cancelled(transport: Transport, keys: Any, steps: Dict[str, List[Any]],
                   skipped: Sequence[str], follows: Dict[str, Tuple[Dict[str, Any], Any]],
                   stop: Callable[[Any, Failure], None]) -> None:
    """Of ``skipped`` (steps of ``steps``, by queue, whose spawn found their marker;
    ``follows``: by id, a step's node and what follows it), each whose marker says
    cancelled (cancelled before it was sent) has what follows it cancelled, by ``stop``
    (what follows, the failure naming the step): it would wait for ever. (A step
    cancelled because one before it ended dead had what follows it cancelled with it:
    stopped again, nothing changes, each step's first fate counts.)

    Raises:
        BrokerError: Redis failed (the whole step before runs again).
    """
    wanted = set(skipped)
    asked = [(queue, step[0]) for queue, queued in steps.items() for step in queued
             if step[0] in wanted]
    if not asked:
        return
    with transport.errors(f"read the markers of {len(asked)} workflow step(s) not sent"):
        pipe = transport.client.pipeline(transaction=False)
        for queue, task_id in asked:
            pipe.hget(keys(queue).once(task_id), "state")
        replies = pipe.execute(raise_on_error=False)
        raise_refusals(replies)  # a marker of another type: not cancelled here, left
    for (_, task_id), state in zip(asked, replies):
        if state == b"cancelled":
            node, follow = follows[task_id]
            stop(follow, Failure(task_id, node["task"], "Cancelled", UNSENT, ""))


__all__: List[Any] = ["UNSENT", "UnsentSteps", "stop_cancelled"]
