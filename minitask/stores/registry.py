"""WorkerRegistry: live workers and their counters, kept by their heartbeats; and
the orders list each worker listens on (``minitask shutdown``)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..printable import printable
from .foreign import ignored, name_of, raise_refusals, text_of, whole
from .store import Store

#: The order that stops a worker as SIGTERM does.
SHUTDOWN = "shutdown"
#: What a worker pushes to its own list to end its listener's wait as it stops.
WAKE = "wake"
#: Orders left for a worker that never reads them (it died) expire after this.
ORDER_TTL_MS = 60_000
#: The fields of a worker's record that hold whole numbers (a time in ms or a count).
_COUNTS = frozenset({"beat_ms", "processed", "failed", "running", "pid", "started_ms",
                     "recycled"})


class WorkerRegistry(Store):
    """Who serves an app: one record per worker, expiring unless it beats."""

    def heartbeat(self, worker: str, info: Dict[str, Any], now_ms: int, ttl_ms: int) -> None:
        """Record a live worker and its counters; the record expires if it stops beating."""
        key = self.app_keys.worker(worker)
        with self.transport.errors("record the worker heartbeat"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zadd(self.app_keys.workers, {worker: now_ms})
            pipe.hset(key, mapping={name: str(value) for name, value in info.items()})
            pipe.pexpire(key, ttl_ms)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        for where, reply in zip((self.app_keys.workers, key, key), replies):
            if isinstance(reply, Exception):  # another type: this worker goes unlisted
                ignored(where, f"it holds another type ({reply})")

    def forget(self, worker: str) -> None:
        with self.transport.errors("unregister the worker"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zrem(self.app_keys.workers, worker)
            pipe.delete(self.app_keys.worker(worker))
            pipe.execute()

    def live(self, now_ms: int, live_ms: int) -> List[Dict[str, str]]:
        """Workers whose last heartbeat is at most ``live_ms`` old, each a dict of its
        record with its ``id`` (what keys it) and ``name`` (``--name``, else the id);
        older ones are pruned."""
        client = self.transport.client
        with self.transport.errors("list workers"):
            pipe = client.pipeline(transaction=False)
            pipe.zremrangebyscore(self.app_keys.workers, "-inf", now_ms - live_ms)
            pipe.zrange(self.app_keys.workers, 0, -1)
            pruned, members = pipe.execute(raise_on_error=False)
            raise_refusals([pruned, members])
            if isinstance(members, Exception):  # another type: no worker can be listed
                ignored(self.app_keys.workers, f"it holds another type than a sorted set "
                                               f"({members})")
                return []
            names = []
            for member in members:
                name = name_of(member, "worker")
                if name is None:
                    ignored(self.app_keys.workers, f"{printable(member)!r} is no worker name")
                else:
                    names.append(name)
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(self.app_keys.worker(name))
            records = pipe.execute(raise_on_error=False) if names else []
        found = []
        for name, record in zip(names, records):
            key = self.app_keys.worker(name)
            if isinstance(record, Exception):
                ignored(key, f"it holds another type than a hash ({record})")
                continue
            info = {}
            for field, value in record.items():
                field_text, value_text = text_of(field), text_of(value)
                if field_text is None or value_text is None:
                    ignored(key, f"field {printable(field)!r} is not UTF-8 text")
                    continue
                if field_text in _COUNTS and whole(value_text, 0, 2 ** 63) is None:
                    ignored(key, f"{field_text} {printable(value_text)!r} is no count")
                    continue
                info[field_text] = value_text
            if info:
                # the worker's id keys its record and its orders; its name (--name) is
                # what it is called, the id when it was given none
                info["id"] = name
                if not info.get("name"):
                    info["name"] = name
                found.append(info)
        return found

    # -- orders ------------------------------------------------------------------

    def send_order(self, worker: str, order: str) -> None:
        """Leave an order on a worker's list, where its listener is blocked waiting."""
        key = self.app_keys.control(worker)
        with self.transport.errors(f"send {order!r} to worker {worker}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.rpush(key, order)
            pipe.pexpire(key, ORDER_TTL_MS)
            pipe.execute()

    def next_order(self, worker: str, timeout: float) -> Optional[str]:
        """Block until an order for ``worker`` arrives (at most ``timeout`` seconds,
        whole seconds on the server); None when none came."""
        key = self.app_keys.control(worker)
        with self.transport.errors("wait for orders"):
            reply = self.transport.client.blpop([key], timeout=max(1, round(timeout)))
        if reply is None:
            return None
        # an order no minitask wrote (not UTF-8) is read escaped, as an unknown order:
        # it must not end the listener, or ``minitask shutdown`` would reach no one
        order = reply[1]
        return order.decode("utf-8", "backslashreplace") if isinstance(order, bytes) else order
