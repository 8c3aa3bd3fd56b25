"""CancelStore: stopping running tasks on request (``cancel(running=True)``).

A request is an entry in the queue's ``cancels`` stream, posted only while the
task is leased. Every worker of the queue blocks on the stream (XREAD), so the
one that holds the task hears of it within a round trip, with no polling; the
others skip ids they do not hold. A stopped attempt ends ``cancelled`` through
``end_cancelled.lua``, which writes nothing if the attempt finished first.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import redis

from ..broker.packing import ScriptCall
from ..broker.transport import text
from ..broker.waits import MAX_BLOCK_SECONDS
from ..wire.message import Outcome
from ..wire.serializer import encode_outcome
from .foreign import ignored, raise_refusals
from .store import Store

_SCRIPTS = ("request_cancel", "end_cancelled")

#: Requests kept per queue (about: trimmed with MAXLEN ~). A worker reads them
#: within milliseconds, so only a worker cut off from Redis for longer than it
#: takes to post this many could miss one.
STREAM_LENGTH = 1000

#: One request as a worker reads it: (queue, stream entry id, task id).
Request = Tuple[str, str, str]


class CancelStore(Store):
    """Requests to stop running tasks, and how a stopped attempt is recorded."""

    scripts = _SCRIPTS

    # -- asking ------------------------------------------------------------------

    def request_call(self, queue: str, task_id: str) -> ScriptCall:
        """The request as a script call (the async producer sends the same one)."""
        k = self.keys(queue)
        return ("request_cancel", queue, (k.leases, k.cancels), (task_id, STREAM_LENGTH), 0)

    def request(self, queue: str, task_id: str) -> bool:
        """Ask the worker holding ``task_id`` to stop it; False when it is not leased."""
        return bool(self.transport.run_calls([self.request_call(queue, task_id)],
                                             f"ask to stop task {task_id}")[0])

    # -- the worker side -----------------------------------------------------------

    def end(self, queue: str, task_id: str, outcome: Outcome, result_ttl_ms: int,
            entry: bytes = b"", recent_length: int = 0) -> bool:
        """Record a stopped attempt as cancelled; False when its lease was gone (the
        attempt's own outcome was recorded first, and stays). ``entry`` goes in the
        queue's record of recent outcomes, kept to ``recent_length`` entries."""
        k = self.keys(queue)
        return bool(self.transport.run(
            "end_cancelled", (k.leases, k.delayed, k.messages, k.deliveries, k.retrying,
                              k.order, k.result(task_id), k.flow, k.flow_due,
                              k.flow_prefix, k.wake, k.recent),
            (task_id, encode_outcome(outcome), result_ttl_ms, recent_length, entry),
            f"record the cancellation of {task_id}"))

    def groups(self, queues: Sequence[str]) -> List[List[str]]:
        """Queues whose streams one XREAD can wait on together: all of them on one
        Redis; one each on a cluster, where the streams live in different slots."""
        if isinstance(self.transport.client, redis.RedisCluster):
            return [[queue] for queue in queues]
        return [list(queues)]

    def positions(self, queues: Sequence[str]) -> Dict[str, str]:
        """Where each queue's stream ends now: requests after these are new. A queue
        whose stream key holds another type (no minitask wrote it) is left out, said
        once: one such key must not stop the watch of every other queue."""
        found: Dict[str, str] = {}
        with self.transport.errors("read the cancel requests"):
            pipe = self.transport.client.pipeline(transaction=False)
            for queue in queues:
                pipe.xrevrange(self.keys(queue).cancels, "+", "-", count=1)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        for queue, last in zip(queues, replies):
            if isinstance(last, Exception):
                ignored(self.keys(queue).cancels, f"it holds another type ({last}); running "
                                                  f"tasks of queue {queue!r} cannot be "
                                                  f"stopped on request until it is fixed")
                continue
            found[queue] = text(last[0][0]) if last else "0-0"
        return found

    def wake(self, queues: Sequence[str]) -> None:
        """End the watches blocked on these queues' streams (a stopping worker's own):
        an entry without an id, which every watch reads and skips."""
        with self.transport.errors("wake the cancel watch"):
            for queue in queues:
                self.transport.client.xadd(self.keys(queue).cancels, {"wake": "1"},
                                           maxlen=STREAM_LENGTH, approximate=True)

    def watch(self, positions: Dict[str, str],
              timeout: float = MAX_BLOCK_SECONDS) -> List[Request]:
        """Block until requests follow ``positions`` (updated in place), or ``timeout``
        seconds pass; the requests, oldest first per queue."""
        by_key = {self.keys(queue).cancels: queue for queue in positions}
        streams: Dict[Any, Any] = {key: positions[queue] for key, queue in by_key.items()}
        with self.transport.errors("wait for cancel requests"):
            reply: Any = self.transport.client.xread(streams,
                                                     block=max(1, int(timeout * 1000)))
        found: List[Request] = []
        for key, entries in reply or []:
            queue = by_key[text(key)]
            for entry_id, fields in entries:
                positions[queue] = text(entry_id)
                task_id = fields.get(b"id") if isinstance(fields, dict) else None
                if task_id is not None:
                    found.append((queue, text(entry_id), text(task_id)))
        return found
