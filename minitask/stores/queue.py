"""QueueStore: a queue's ready and lease operations: enqueue, fetch, give back, renew.

Where tasks wait and who holds them: the ready lists, the delayed set, the
leases, and the wake list idle workers block on. Outcomes (ack, retry, dead
letter) are the results store's.
"""
from __future__ import annotations

import math
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ..broker.durability import Durability, keep_unconfirmed
from ..broker.keys import PRIORITIES
from ..broker.packing import ScriptCall, command
from ..broker.transport import Transport, text
from ..errors import BrokerError, DurabilityError
from ..wire.message import Message, quick_init
from ..wire.serializer import decode_message
from .bounds import message_in_pieces, message_of
from .foreign import (MAX_MESSAGE_BYTES, UNREAD_MARK, count_of, dropped_overlong, ignored,
                      raise_refusals, unread_error)
from .names import REGISTRY_READ, read_names
from .partial_batches import cut_write, refused_in_part, written_or_maybe
from .plain import PlainPush
from .store import KEPT_QUEUES, Store

#: Wake tokens kept per queue: enough to wake that many idle workers at once.
WAKE_CAP = 256
#: Seconds after which a write into a queue adds it to the app's registry again (a
#: SADD costs a plain ``delay()`` a fifth more in Redis: not with every write).
REGISTER_AGAIN = 1.0
#: Wake lists one EXISTS asks about, at most (``woken``).
WAKES_ASKED = 1000
#: Delayed tasks promoted and expired leases reclaimed per fetch, at most.
BATCH_LIMIT = 1000

_SCRIPTS = ("enqueue", "enqueue_now", "fetch", "release", "hash_fields", "message_piece")
#: The enqueue call's constant arguments, encoded once.
_WAKE_CAP_ARG = b"%d" % WAKE_CAP
_BATCH_LIMIT_ARG = b"%d" % BATCH_LIMIT


@quick_init
@dataclass(frozen=True)
class Delivery:
    """A message handed to this worker under a lease."""

    task_id: str
    body: bytes
    delivery: int
    priority: int
    #: False when the fetch found no flow control in the queue: the task has no
    #: spec nor gets one while its lease is held, so its ack needs no flow keys
    flow: bool = True
    #: False when the fetch found flow control in the queue but none of the tasks it
    #: leased with a spec holding a slot (max_running, group_max_running: a grouped
    #: task of no limits has none): its ack drops the task's spec without reading it
    slots: bool = True

    def message(self) -> Message:
        """The decoded message; raises DecodeError for a corrupt or unknown envelope,
        or one the fetch left unread, too long (``foreign.unread_error``)."""
        if self.body[:1] == UNREAD_MARK:
            raise unread_error(self.task_id, self.body)
        return decode_message(self.body)


@quick_init
@dataclass(frozen=True)
class FetchResult:
    deliveries: List[Delivery]
    poisoned: List[str]
    next_event_ms: Optional[int]
    #: (id, priority) of tasks whose ``expires`` had passed: leased, for the worker
    #: to end as cancelled ("Expired") without running them
    expired: List[Tuple[str, int]] = field(default_factory=list)


@quick_init
@dataclass(frozen=True)
class FetchTerms:
    """What a fetch asks for, other than the queue and the time."""

    lease_ms: int
    count: int
    max_deliveries: int
    #: The longest message a fetch reads (the app's ``max_message_bytes``; fetch.lua)
    max_bytes: int = MAX_MESSAGE_BYTES


class QueueStore(Store):
    """The queues of one app: what is ready, what is due later, who holds what."""

    scripts = _SCRIPTS

    def __init__(self, transport: Transport, app_name: str) -> None:
        super().__init__(transport, app_name)
        #: The queues (and lanes) this store registered, each with when (``monotonic``)
        #: it last did: a write into a queue registers it again ``REGISTER_AGAIN`` s
        #: later, so that a registry lost (a restart without persistence, a failover to
        #: an empty replica, a deleted key) lists it again at once.
        self._known_queues: Dict[str, float] = {}
        #: A fetch's keys, by queue (``_made_fetch_keys``).
        self._fetch_keys: Dict[str, Tuple[str, ...]] = {}
        #: Drop this thread's outstanding wait before it gets busy with a task (the
        #: transport's, bound: asked at every task taken, with no call more).
        self.stop_waiting: Callable[[], None] = transport.stop_waiting
        #: A plain ``delay()``'s write, without a script (``plain.PlainPush.push``): a bound
        #: method, so that the hot path makes no call more.
        self.push: Callable[[str, Tuple[str, bytes, int, int]], bool] = PlainPush(
            transport, self.keys, self.app_keys.queues, self._known_queues,
            (WAKE_CAP, REGISTER_AGAIN)).push
        #: The last queues ``woken`` asked about, and its EXISTS commands, packed.
        self._asked: Optional[Tuple[Tuple[str, ...], bytes, int]] = None
        #: The queues the app declares (set by the app): a lookup by id asks them first.
        self.declared: Callable[[], List[str]] = list

    # -- producing ---------------------------------------------------------------

    def enqueue(self, queue: str, entries: Sequence[Tuple[str, bytes, int, int]],
                now_ms: int, durability: Optional[Durability] = None) -> int:
        """Store (id, body, priority, due_ms) entries of one queue; returns how many were new.

        ``durability`` (default: the app's) says how replicas confirm the write.
        """
        what = f"enqueue into queue {queue!r}"
        try:
            call = self.enqueue_now_call(queue, entries, now_ms)
            added = -1 if call is None else self.transport.run_calls([call], what, durability)[-1]
            if added == -1:
                added = self.transport.run_calls([self.enqueue_call(queue, entries, now_ms)],
                                                 what, durability)[-1]
        except DurabilityError:
            with after_write():
                self.register_queues([queue], again=True)  # written, unconfirmed: findable
            raise
        except BrokerError as exc:
            if exc.sent:  # its reply lost: perhaps written, findable by id all the same
                self._listed_all_the_same([(queue, entries)])
            raise
        if monotonic() - self._known_queues.get(queue, -REGISTER_AGAIN) >= REGISTER_AGAIN:
            with after_write():
                self.register_queues([queue], again=True)
        return int(added)

    def enqueue_queues(self, by_queue: Dict[str, List[Tuple[str, bytes, int, int]]],
                       now_ms: int, chunk: int,
                       call: Optional[Callable[[str, Sequence[Tuple[str, bytes, int, int]], int],
                                               ScriptCall]] = None) -> int:
        """Store the entries of several queues in one write where the connection allows
        (one script call per queue and ``chunk`` entries, each all or nothing); returns
        how many were new. ``call`` makes each script call (default: ``enqueue_call``).

        Not all or nothing across queues (Redis Cluster keeps each queue in a slot of
        its own): a refused call does not stop the others, and the BrokerError says
        which queues' calls (tasks and ids) were enqueued (``sent`` when any was; its
        ``enqueued_ids``) and which were not (``unsent_ids``). A write
        replicas did not confirm in time stops none: DurabilityError, after them all,
        names every task written unconfirmed (``task_ids``)."""
        make = call or self.enqueue_call
        parts = [(queue, entries[start:start + chunk]) for queue, entries in by_queue.items()
                 for start in range(0, len(entries), chunk)]
        if not parts:
            return 0
        calls = [make(queue, entries, now_ms) for queue, entries in parts]
        # which queues: said below, per call (a refusal: its own, and those beside it)
        what = f"enqueue an app.batch() block into {len(by_queue)} queue(s)"
        added: List[Any] = [0] * len(calls)
        with keep_unconfirmed() as kept:  # unconfirmed: every call made, then one error
            if self.transport.connections.pool is not None:  # one write, refusals in place
                mark = len(kept)
                try:
                    added = self.transport.run_calls(calls, what, keep_refused=True)
                except BrokerError as exc:  # (a WAIT cut short is kept: refusals in place)
                    if not exc.sent:
                        raise
                    whole = len(parts) if exc.sent_calls is None else exc.sent_calls
                    self._listed_all_the_same(parts[:whole])  # findable by id all the same
                    if exc.sent_calls is None:
                        raise  # its reply lost: every call may have run (Sender.batch says)
                    raise cut_write(exc, parts, whole) from exc
                # unconfirmed: those written (or perhaps), never those Redis refused
                kept.note([entry[0] for _, entries in written_or_maybe(parts, added)
                           for entry in entries], mark)
            else:  # Redis Cluster: a call at a time, to say where one stopped
                for index, (one, (_, entries)) in enumerate(zip(calls, parts)):
                    try:
                        with kept.writing([entry[0] for entry in entries]):
                            added[index] = self.transport.run_calls([one], what)[0]
                    except BrokerError as exc:
                        if exc.sent and not exc.part_way:  # its reply lost: perhaps
                            self._listed_all_the_same(parts[:index + 1])  # written
                            raise cut_write(exc, parts, index + 1, index) from exc
                        # refused (part way: perhaps written, as refused_in_part says)
                        added[index:] = [exc] + [None] * (len(calls) - index - 1)
                        break
        written = written_or_maybe(parts, added)  # (a refusal part way: perhaps written)
        if any(isinstance(reply, BrokerError) for reply in added):  # (sent if any enqueued)
            self._listed_all_the_same(written)  # (a registry refused too: the refusal says)
            raise refused_in_part(what, self.transport.description, parts, added)
        with after_write():
            self.register_queues({queue for queue, _ in written}, again=True)
        kept.raise_any()  # written, each of them: ``task_ids`` names them
        return sum(int(count) for count in added)

    def _listed_all_the_same(self, parts: Sequence[Tuple[str, Any]]) -> None:
        """List the queues of calls written, or perhaps (a lost reply): findable by id."""
        with suppress(BrokerError):  # (the connection that lost the reply: its error says)
            self.register_queues({queue for queue, _ in parts}, again=True)

    def enqueue_now_call(self, queue: str, entries: Sequence[Tuple[str, bytes, int, int]],
                         now_ms: int) -> Optional[ScriptCall]:
        """For one message ready at once, the cheap enqueue_now.lua call; None for any
        other. A reply of -1 means it wrote nothing: send ``enqueue_call`` then."""
        if len(entries) != 1 or entries[0][3] > now_ms or now_ms < 0:
            return None  # (a clock before 1970 has no horizon of now's digits and a 9)
        task_id, body, priority, _ = entries[0]
        k = self.keys(queue)
        return ("enqueue_now", queue, (k.messages, k.delayed, k.wake),
                (k.ready[9 - priority], k.result(task_id), now_ms, _WAKE_CAP_ARG, task_id, body),
                2)

    def enqueue_call(self, queue: str, entries: Sequence[Tuple[str, bytes, int, int]],
                     now_ms: int) -> ScriptCall:
        """The enqueue script call (the async producer sends the same one)."""
        k = self.keys(queue)
        tail: List[Any] = [k.result(task_id) for task_id, _, _, _ in entries]
        tail += (now_ms, _WAKE_CAP_ARG, _BATCH_LIMIT_ARG)
        for task_id, body, priority, due_ms in entries:
            tail += (task_id, body, priority, due_ms)
        return ("enqueue", queue, (k.messages, k.delayed, k.wake, *k.ready, k.order,
                                   k.sequence), tail, len(entries))

    def register_queues(self, queues: Iterable[str], lanes: bool = False,
                        again: bool = False) -> None:
        """Remember queue names app-wide so status and lookups by id can find them;
        with ``lanes``, broadcast lanes, in a registry of their own (``names.py``).
        Once each, or with ``again`` (a write into them), once each ``REGISTER_AGAIN``
        seconds: a registry lost lists them again at the next write."""
        now = monotonic()
        known = self._known_queues
        names = [q for q in queues if now - known.get(q, -REGISTER_AGAIN) >= REGISTER_AGAIN
                 and (again or q not in known)]
        if names:
            key = self.app_keys.lanes if lanes else self.app_keys.queues
            with self.transport.errors("register queues"):
                pipe = self.transport.client.pipeline(transaction=False)
                pipe.sadd(key, *names)
                (added,) = pipe.execute(raise_on_error=False)
                raise_refusals([added])
            if isinstance(added, Exception):  # another type: the queues still run, unlisted
                ignored(key, f"it holds another type than a set ({added})")
            known.update(dict.fromkeys(names, now))

    def queue_names(self, most: int = REGISTRY_READ) -> List[str]:
        """At most ``most`` of the app's queues (then lanes), as ``queue_registry``."""
        return self.queue_registry(most)[0]

    def queue_registry(self, most: int = REGISTRY_READ, apart: Sequence[str] = (),
                       invalid: Optional[List[int]] = None) -> Tuple[List[str], int]:
        """At most ``most`` of the app's queues, then lanes, from its registries (a
        member that can name no queue, not minitask's, is left out, said in the log);
        and how many members, ``apart`` aside, were not read or left out (of them, those
        naming no queue are added to ``invalid[0]``: ``names.read_names``)."""
        return read_names(self.transport, (self.app_keys.queues, self.app_keys.lanes), most,
                          apart, invalid)

    def lookup_names(self) -> Tuple[List[str], int]:
        """The queues a lookup by id alone asks (a handle's status, ``forget()``,
        ``group_handle``): those the app declares, then at most ``REGISTRY_READ`` of
        its registries; and how many registry members it does not ask."""
        declared = self.declared()
        others, left = self.queue_registry(REGISTRY_READ + len(declared), declared)
        taken = set(declared)
        rest = [queue for queue in others if queue not in taken]
        return declared + rest[:REGISTRY_READ], left + max(0, len(rest) - REGISTRY_READ)

    # -- consuming ---------------------------------------------------------------

    def fetch(self, queue: str, *, now_ms: int, lease_ms: int, count: int,
              max_deliveries: int, max_bytes: int = MAX_MESSAGE_BYTES) -> FetchResult:
        """Promote what is due, reclaim expired leases, and lease up to ``count`` tasks."""
        reply = self.transport.run_calls(
            [self.fetch_call(queue, now_ms, FetchTerms(lease_ms, count, max_deliveries,
                                                       max_bytes))],
            f"fetch from queue {queue!r}")[-1]
        return self.fetch_result(reply)

    def fetch_call(self, queue: str, now_ms: Optional[int], terms: FetchTerms) -> ScriptCall:
        """A fetch, to send alone or behind other calls; ``now_ms`` None reads the
        server's clock (for a fetch that runs later than it is sent).

        With ``now_ms``, the lease deadline goes along in decimal digits: the script
        writes lease scores from it as text, so Redis formats no number (fetch.lua).
        """
        keys = self._fetch_keys.get(queue) or self._made_fetch_keys(queue)
        if now_ms is None:
            return ("fetch", queue, keys,
                    ("server", terms.lease_ms, terms.count, terms.max_deliveries,
                     BATCH_LIMIT, b"", terms.max_bytes), 0)
        return ("fetch", queue, keys,
                (b"%d" % now_ms, terms.lease_ms, terms.count, terms.max_deliveries,
                 BATCH_LIMIT, b"%d" % (now_ms + terms.lease_ms), terms.max_bytes), 0)

    def _made_fetch_keys(self, queue: str) -> Tuple[str, ...]:
        """A fetch's keys of ``queue``, made once (``_fetch_keys``): a fetch goes with
        every task, and its nineteen keys never change."""
        k = self.keys(queue)
        keys = (k.delayed, k.leases, k.messages, k.deliveries, k.wake, k.dead, *k.ready,
                k.cancelled, k.order, k.flow, k.flow_due, k.flow_prefix, k.flow_limiters,
                k.flow_parked)
        if len(self._fetch_keys) >= KEPT_QUEUES:
            self._fetch_keys.clear()
        self._fetch_keys[queue] = keys
        return keys

    @staticmethod
    def fetch_result(reply: Sequence[bytes]) -> FetchResult:
        """A fetch script's reply, read: a head of numbers, then the ids and messages."""
        head = reply[0].split()
        next_ms, poisoned, expired = int(head[0]), int(head[2]), int(head[3])
        flow, slots, numbers = head[1] != b"0", head[1] != b"2", head[4:]
        leased = (len(numbers) - expired) // 2
        deliveries: List[Delivery] = []  # loops, not comprehensions: no function made
        for i in range(leased):
            deliveries.append(Delivery(reply[1 + 2 * i].decode(), reply[2 + 2 * i],
                                       int(numbers[2 * i]), int(numbers[2 * i + 1]), flow, slots))
        at = 1 + 2 * leased
        if len(reply) > at + poisoned + expired:  # overlong entries dropped (fetch.lua)
            dropped_overlong(reply[-1])
        return FetchResult(deliveries,
                           [text(p) for p in reply[at:at + poisoned]] if poisoned else [],
                           next_ms if next_ms >= 0 else None,
                           [(text(reply[at + poisoned + i]), int(numbers[2 * leased + i]))
                            for i in range(expired)] if expired else [])

    def wait(self, queues: Sequence[str], timeout: float, *, interrupt: Optional[int] = None,
             then_fetch: Optional[FetchTerms] = None) -> Optional[FetchResult]:
        """Block until a queue may have work, ``timeout`` seconds pass, or the file
        descriptor ``interrupt`` becomes readable.

        With ``then_fetch``, the wait ends with a fetch from the first queue and
        returns its result; None means nothing was fetched (a cluster, a test
        double, an ACL without CLIENT ID, CLIENT UNBLOCK or TIME): the caller
        fetches itself.
        """
        then = None if then_fetch is None else self.fetch_call(queues[0], None, then_fetch)
        replies = self.transport.wait([self.keys(q).wake for q in queues], timeout,
                                      interrupt=interrupt, then=then)
        if replies is None:
            return None
        if isinstance(replies[-1], BaseException):
            raise replies[-1]
        return self.fetch_result(replies[-1])

    def woken(self, queues: Sequence[str]) -> List[str]:
        """Those of ``queues`` whose wake list holds a token now: work came (or a
        delayed task now due first) since a fetch found them empty and emptied it.

        One EXISTS over them all (packed once for the same queues: a worker asks
        about the same ones task after task), then one each only when any holds
        one; on Redis Cluster (a slot per queue) one each, in a pipeline."""
        names = tuple(queues)
        asked = self._asked
        if asked is None or asked[0] != names:
            wakes = [self.keys(queue).wake for queue in names]
            chunks = [wakes[start:start + WAKES_ASKED]
                      for start in range(0, len(wakes), WAKES_ASKED)]
            asked = self._asked = (names, b"".join(command("EXISTS", *chunk)
                                                   for chunk in chunks), len(chunks))
        what = f"look for new tasks in {len(names)} queue(s)"
        held = self.transport.send_commands(asked[1], asked[2], what)
        if held is not None:
            for reply in held:
                if isinstance(reply, Exception):  # (an ACL without EXISTS, say)
                    raise self.transport.failure(reply, what, None)
            if not any(held):
                return []
        with self.transport.errors(what):
            pipe = self.transport.client.pipeline(transaction=False)
            for queue in names:
                pipe.exists(self.keys(queue).wake)
            found = pipe.execute()
        return [queue for queue, one in zip(names, found) if one]

    def tokens_taken(self) -> List[str]:
        """The wake lists this thread's waits took a token off since it last asked."""
        return self.transport.connections.tokens_taken()

    def renew(self, queue: str, leases: Sequence[Tuple[str, int]], deadline_ms: int) -> None:
        """Push the lease deadline of running (id, priority) tasks to ``deadline_ms``."""
        mapping = {task_id: deadline_ms * 10 + 9 - priority for task_id, priority in leases}
        with self.transport.errors(f"renew leases in queue {queue!r}"):
            self.transport.client.zadd(self.keys(queue).leases, mapping, xx=True)

    def release(self, queue: str, leases: Sequence[Tuple[str, int]],
                deliveries: Optional[Sequence[int]] = None) -> int:
        """Give leased (id, priority) tasks back to the head of their queue; with
        ``deliveries``, each only while its delivery count is still that (release.lua).

        On the calling thread's own connection (``run_calls``), not the client's
        pool: a stopping thread pool gives back from every thread at once, and the
        pool, short of connections, refused some ("Too many connections"), leaving
        their tasks leased until the lease expired.
        """
        if not leases:
            return 0
        k = self.keys(queue)
        args: List[Any] = []
        for i, (task_id, priority) in enumerate(leases):
            args += (task_id, priority, "" if deliveries is None else deliveries[i])
        keys = (k.leases, k.deliveries, k.wake, *k.ready, k.flow, k.flow_due, k.flow_prefix)
        return int(self.transport.run_calls([("release", queue, keys, args, 0)],
                                            f"give back tasks to queue {queue!r}")[0])

    def message_body(self, queue: str, task_id: str) -> Optional[bytes]:
        """A task's message (``bounds.message_of``: DecodeError when it is too large)."""
        return message_of(self.transport, self.keys(queue).messages, task_id, self.bounds.message)

    def message_pieces(self, queue: str, task_id: str) -> Tuple[Optional[bytes], int]:
        """A task's message and its length, no reply carrying more than a piece of it
        (``bounds.message_in_pieces``: None when too long to read so)."""
        return message_in_pieces(self.transport, self.keys(queue).messages, task_id,
                                 self.bounds.message)

    def hold_back(self, queue: str, task_id: str, until_ms: int) -> None:
        """Push a poisoned task's expired lease to ``until_ms``, its band kept (XX: not
        one buried meanwhile): no fetch reports it before then, so a burial that failed
        is tried again then, not at every fetch (each fetch's next event was it)."""
        key = self.keys(queue).leases
        with self.transport.errors(f"hold back task {task_id} in queue {queue!r}"):
            score = self.transport.client.zscore(key, task_id)
            if score is not None:
                band = int(score % 10) if math.isfinite(score) else 9
                self.transport.client.zadd(key, {task_id: until_ms * 10 + band}, xx=True)

    # -- monitoring --------------------------------------------------------------

    def counts(self, queue: str) -> Dict[str, Any]:
        """Ready tasks per priority, and the scheduled, running and dead counts."""
        return self.counts_many([queue])[queue]

    def counts_many(self, queues: Sequence[str]) -> Dict[str, Dict[str, Any]]:
        """``counts`` of each queue, in two round trips whatever their number (a page
        of a hundred queues must not wait for a hundred): LLEN and ZCARD of every
        queue, then ZCOUNT per priority of those with cancelled entries."""
        keys = [self.keys(queue) for queue in queues]
        with self.transport.errors(f"count tasks of {len(keys)} queue(s)"):
            pipe = self.transport.client.pipeline(transaction=False)
            counted: List[str] = []
            for k in keys:
                for key in k.ready:
                    pipe.llen(key)
                for key in (k.delayed, k.leases, k.dead, k.cancelled):
                    pipe.zcard(key)
                counted += (*k.ready, k.delayed, k.leases, k.dead, k.cancelled)
            counts = pipe.execute(raise_on_error=False)
            raise_refusals(counts)
            replies = [count_of(key, reply) for key, reply in zip(counted, counts)]
            per_queue = [replies[i * 14:(i + 1) * 14] for i in range(len(keys))]
            cancelled_in = [k for k, counts in zip(keys, per_queue) if counts[13]]
            pipe = self.transport.client.pipeline(transaction=False)
            for k in cancelled_in:
                for priority in PRIORITIES:  # cancelled entries still in the ready lists
                    pipe.zcount(k.cancelled, priority, priority)
            zcounts = pipe.execute(raise_on_error=False) if cancelled_in else []
            raise_refusals(zcounts)
            cancelled = iter([count_of(k.cancelled, reply) for k, reply in zip(
                [k for k in cancelled_in for _ in PRIORITIES], zcounts)])
        found = {}
        for queue, counts in zip(queues, per_queue):
            minus = [next(cancelled) for _ in PRIORITIES] if counts[13] else [0] * 10
            ready = [max(0, entries - gone) for entries, gone in zip(counts[:10], minus)]
            found[queue] = {"ready": sum(ready),
                            "ready_by_priority": {str(p): c for p, c in zip(PRIORITIES, ready)
                                                  if c},
                            "scheduled": counts[10], "running": counts[11], "dead": counts[12]}
        return found


@contextmanager
def after_write() -> Iterator[None]:
    """The registry written after the tasks: its failure said ``sent`` (they are in
    Redis, enqueued: sending them again would run them twice), never "could not"."""
    try:
        yield
    except BrokerError as exc:
        if exc.sent:
            exc.written = True
            raise
        error = BrokerError(f"{exc} (after the tasks were written: they are enqueued)",
                            reason=exc.reason, sent=True)
        error.written = True
        raise error from exc
