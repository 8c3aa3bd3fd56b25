"""FlowStore: enqueueing calls with flow control, and reading limiter state.

Limits are enforced by the scripts that hand tasks out and end them (fetch, ack,
retry, bury, release, end_cancelled: ``lua/flow.lua`` in front of each); this
store writes what they read: a spec beside each flow-controlled message, in the
same step.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..broker.durability import Durability
from ..errors import DurabilityError
from ..broker.keys import queue_keys
from ..broker.packing import ScriptCall
from ..broker.transport import Transport, text
from .queue import QueueStore
from .scripts import source

#: One checked message: (id, body, priority, due ms or 0), as ``Sender.prepare`` makes it.
Entry = Tuple[str, bytes, int, int]


class FlowStore:
    """Flow-controlled enqueues of one app, through the queue store's enqueue call."""

    #: Messages per enqueue script call: keeps each script short so Redis stays responsive.
    CHUNK = 1000

    def __init__(self, transport: Transport, app_name: str, queues: QueueStore) -> None:
        self.transport = transport
        self.app_name = app_name
        self.queues = queues
        transport.register("enqueue_flow", source("enqueue_flow"))

    def enqueue_call(self, queue: str, entries: Sequence[Entry],
                     specs: Mapping[str, str], now_ms: int) -> ScriptCall:
        """The plain enqueue call of ``entries``, with the flow hash and the limiter set
        added as the last keys and each message's spec (by id; none: an empty spec)
        as the last ARGVs."""
        _, slot, static_keys, tail, dynamic = self.queues.enqueue_call(queue, entries, now_ms)
        k = queue_keys(self.app_name, queue)
        args: List[Any] = list(tail)
        args[dynamic:dynamic] = [k.flow, k.flow_limiters]
        args += [specs.get(entry[0], "") for entry in entries]
        args.append(len(entries))
        return ("enqueue_flow", slot, static_keys, args, dynamic + 2)

    def send(self, by_queue: Mapping[str, Sequence[Entry]], specs: Mapping[str, str],
             now_ms: int, durability: Optional[Durability] = None) -> int:
        """Enqueue checked entries by queue (``Sender.prepare``); how many were added.

        ``durability`` (default: the app's) says how replicas confirm each write."""
        added = 0
        for queue, entries in by_queue.items():
            try:
                for start in range(0, len(entries), self.CHUNK):
                    call = self.enqueue_call(queue, entries[start:start + self.CHUNK], specs,
                                             now_ms)
                    added += int(self.transport.run_calls(
                        [call], f"enqueue into queue {queue!r}", durability)[-1])
            except DurabilityError:
                self.queues.register_queues([queue])  # written, unconfirmed: findable by id
                raise
            self.queues.register_queues([queue])
        return added

    def limiter_state(self, queue: str, limiter: str) -> Dict[str, Any]:
        """Parked, running and recently started counts of one limiter (for tests and
        operators); ``limiter`` as the flow spec names it."""
        k = queue_keys(self.app_name, queue)
        base = k.flow_prefix + limiter
        with self.transport.errors(f"read limiter {limiter!r} of queue {queue!r}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.llen(base + ":park")
            pipe.smembers(base + ":running")
            pipe.zcard(base + ":starts")
            pipe.zscore(k.flow_due, limiter)
            parked, running, starts, due = pipe.execute()
        return {"parked": int(parked), "running": sorted(text(m) for m in running),
                "starts": int(starts), "due_ms": None if due is None else int(due)}

    def parked(self, queue: str) -> int:
        """Tasks of ``queue`` parked by their limits: ready, though not handed out yet.

        One SMEMBERS and one LLEN per limiter the queue's messages have named (never
        a SCAN): bounded by the task names and limit keys in use, not by the tasks."""
        return self.parked_many([queue])[queue]

    def parked_many(self, queues: Sequence[str]) -> Dict[str, int]:
        """``parked`` of each queue, in two round trips whatever their number."""
        keys = [queue_keys(self.app_name, queue) for queue in queues]
        with self.transport.errors(f"count the parked tasks of {len(keys)} queue(s)"):
            client = self.transport.client
            pipe = client.pipeline(transaction=False)
            for k in keys:
                pipe.smembers(k.flow_limiters)
            # a key of another type (data minitask did not write) counts as none
            limiters = [found if isinstance(found, (set, list)) else ()
                        for found in pipe.execute(raise_on_error=False)]
            parks = [(queue, k.flow_prefix + text(limiter) + ":park")
                     for queue, k, named in zip(queues, keys, limiters) for limiter in named]
            counts: List[Any] = []
            if parks:
                pipe = client.pipeline(transaction=False)
                for _, park in parks:
                    pipe.llen(park)
                counts = pipe.execute(raise_on_error=False)
        found = {queue: 0 for queue in queues}
        for (queue, _), count in zip(parks, counts):
            if isinstance(count, int):  # a park key of another type counts as empty
                found[queue] += count
        return found

    def specs(self, queue: str) -> Dict[str, str]:
        """Every flow spec of the queue, by id (a leak shows here)."""
        with self.transport.errors(f"read the flow specs of queue {queue!r}"):
            raw = self.transport.client.hgetall(queue_keys(self.app_name, queue).flow)
        return {text(key): text(value) for key, value in raw.items()}
