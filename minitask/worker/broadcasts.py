"""Broadcasts: the worker's subscription to the broadcast calls of its queues.

A worker subscribes its subscriber name (``--name``, default: the host name)
to each queue it serves that has a broadcast task. Before the other sources,
it pulls that name's next calls into the name's lane and leases them in the
same round trip (``stores/broadcast.py``): from there a call is a task of the
lane, with its lease, retries, time limit and dead letter. Workers that
share a name share the cursor, so each call runs once per name.

An idle worker waits on its lanes' wake lists beside its queues' (one BLPOP):
a send pushes a token on each subscriber's lane, and a pull that leaves calls
behind pushes one for another idle worker of the same name.
"""
from __future__ import annotations

import socket
from time import monotonic
from typing import Any, Dict, List, Optional, Set, Tuple

from ..broker.keys import check_name, lane
from ..broker.packing import ScriptCall
from ..errors import ConfigurationError
from ..printable import own_logger, printable
from ..stores.queue import FetchTerms
from .host import Host
from .leases import Holdings, Job, Leases
from .sources import QueueSource, Source
from .stop import Stop

logger = own_logger(__name__)


def default_subscriber() -> str:
    """The subscriber name of a worker not given one: the host name."""
    return socket.gethostname() or "localhost"


def check_subscriber(name: Any, kind: str = "subscriber") -> str:
    """``name`` if it can name a subscriber (as it could a queue), else ConfigurationError
    calling it a ``kind`` name: a worker's name (``--name``) is also its subscriber's."""
    if not isinstance(name, str):
        raise ConfigurationError(f"{kind} name must be a str, got {name!r}")
    try:
        return check_name(kind, name)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def broadcast_queues(host: Host, queues: List[str]) -> List[str]:
    """The queues among ``queues`` that one of the app's broadcast tasks is sent to."""
    declared = {task.options.queue for task in host.tasks.values() if task.options.broadcast}
    return [queue for queue in queues if queue in declared]


class BroadcastSource:
    """Pulls and leases the subscriber's broadcast calls, then asks ``inner``."""

    def __init__(self, host: Host, inner: Source, queues: QueueSource, holdings: Holdings,
                 leases: Leases, stop: Stop, subscriber: str) -> None:
        self._host = host
        self._inner = inner
        self._queues = queues
        self._holdings = holdings
        self._leases = leases
        self._stop = stop
        self.subscriber = subscriber
        #: queue -> this subscriber's lane of it
        self.lanes: Dict[str, str] = {queue: lane(queue, subscriber)
                                      for queue in broadcast_queues(host, queues.queues)}
        queues.wake_also = list(self.lanes.values())
        if self.lanes:
            queues.behind_wait = self
        self._more = False
        #: (queue, note) of pulls that skipped another's data, logged already
        self._noted: Set[Tuple[str, str]] = set()

    def subscribe(self) -> None:
        """Subscribe to the broadcasts of the queues, as the worker starts."""
        store = self._host.broker.broadcasts
        now_ms = self._host.clock.now_ms()
        for queue in self.lanes:
            notes: List[str] = []
            if store.subscribe(queue, self.subscriber, now_ms, notes):
                logger.info("subscribed as %r to the broadcasts of queue %r", self.subscriber,
                            queue)
            for note in notes:  # refused: its other queues go on; its pulls (each
                # round) say the same until the key is fixed, then subscribe it
                self._noted.add((queue, note))
                logger.warning("subscriber %r of queue %r: %s", self.subscriber, queue, note)
        if self.lanes:
            # known app-wide: dead letters, status and lookups by id find the lanes
            self._host.broker.queues.register_queues(self.lanes.values(), lanes=True)

    def beat(self, now_ms: int) -> None:
        """Say this subscriber is alive (the heartbeat's; pulls say it too)."""
        if not self.lanes:
            return
        for refused in self._host.broker.broadcasts.seen(list(self.lanes), self.subscriber,
                                                         now_ms):
            if ("seen", refused) not in self._noted:  # once: it may stay for long
                self._noted.add(("seen", refused))
                logger.error("subscriber %r: Redis refused to record it alive in %s; its "
                             "calls still run (rename or delete the key)", self.subscriber,
                             refused)

    # -- the Source protocol ---------------------------------------------------

    def next_job(self) -> Optional[Job]:
        """A broadcast call of this subscriber if one is ready, else ``inner``'s job."""
        if self.lanes and not self._stop.is_set() and not self._holdings.closing:
            job = self._holdings.next_buffered(self._stop.event)
            if job is not None:
                return job
            self._pull()
            job = self._holdings.next_buffered(self._stop.event)
            if job is None and self._more and not self._holdings.closing:
                # calls wait that the fetch did not lease: the pull ran after the fetch
                # (Redis had to load its script first), or the lane held stale entries
                self._pull()
                job = self._holdings.next_buffered(self._stop.event)
            if job is not None:
                return job
        return self._inner.next_job()

    def more_due_now(self) -> bool:
        return self._more or self._inner.more_due_now()

    def wait(self) -> None:
        self._inner.wait()

    # -- pulling ---------------------------------------------------------------

    def wait_calls(self) -> List[ScriptCall]:
        """The pull, sent behind each idle wait: the wake-up a send causes leases
        the call in the wait's own round trip (on the server's clock)."""
        return self._pull_calls(None)

    def waited(self, replies: List[Any]) -> None:
        self._took(replies)

    def _pull(self) -> None:
        """Pull and lease now, in a round trip of its own."""
        if monotonic() > self._leases.renew_by:  # (Redis was away: leases renewed first)
            self._leases.renew_first()
        replies = self._host.broker.transport.run_calls(
            self._pull_calls(self._host.clock.now_ms()), "pull broadcast calls",
            keep_refused=True)  # one lane's foreign data must not lose another's leases
        self._took(replies)

    def _pull_calls(self, now_ms: Optional[int]) -> List[ScriptCall]:
        """Per lane: pull calls into it, lease from it, and leave a wake token if
        calls are left for another worker of the name (``now_ms`` None: the server's)."""
        store = self._host.broker.broadcasts
        queues = self._host.broker.queues
        count = self._queues.prefetch
        terms = FetchTerms(self._leases.lease_ms, count, self._host.max_deliveries,
                           self._host.max_message_bytes)
        calls: List[ScriptCall] = []
        for queue, own in self.lanes.items():
            calls += (store.pull_call(queue, self.subscriber, count, now_ms, terms.max_bytes),
                      queues.fetch_call(own, now_ms, terms),
                      store.pull_call(queue, self.subscriber, 0, now_ms))
        return calls

    def _took(self, replies: List[Any]) -> None:
        """Hold what the pulls leased; note whether calls are left."""
        store = self._host.broker.broadcasts
        queues = self._host.broker.queues
        more = False
        woken: List[Tuple[str, Any]] = []  # (queue, its first pull)
        for index, (queue, own) in enumerate(self.lanes.items()):
            first, fetched, last = replies[3 * index:3 * index + 3]
            refusals = [reply for reply in (first, fetched, last) if isinstance(reply, Exception)]
            if refusals:
                self._refused(queue, refusals[0])
                if not isinstance(fetched, Exception):
                    self._queues.take(own, queues.fetch_result(fetched))  # what it leased
                continue
            for pull in (store.pulled(first), store.pulled(last)):
                if pull.note and (queue, pull.note) not in self._noted:
                    self._noted.add((queue, pull.note))  # once: it may stay for long
                    logger.warning("subscriber %r of queue %r: %s", self.subscriber, queue,
                                   pull.note)
            pull = store.pulled(first)
            if pull.skipped:
                logger.warning("subscriber %r missed %d broadcast call(s) of queue %r: they "
                               "were dropped over broadcast_maxlen or broadcast_ttl before it "
                               "pulled them", self.subscriber, pull.skipped, queue)
            self._queues.take(own, queues.fetch_result(fetched))
            more = more or store.pulled(last).more
            woken.append((queue, pull))
        self._more = more
        for queue, pull in woken:  # after what was leased is held: this may fail
            store.woken(queue, self.subscriber, pull.woken, pull.missed, pull.pulled)

    def _refused(self, queue: str, error: BaseException) -> None:
        """Redis refused this subscriber's lane of ``queue`` (data minitask did not
        write): said once; its other lanes and the worker's queues go on."""
        note = f"Redis refused its lane ({printable(error)}); it runs no broadcast call of this "
        note += "queue until the lane's keys are fixed (inspect them with redis-cli)"
        if (queue, note) not in self._noted:
            self._noted.add((queue, note))
            logger.error("subscriber %r of queue %r: %s", self.subscriber, queue, note)
