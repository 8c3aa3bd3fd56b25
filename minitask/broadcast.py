"""Broadcast tasks: each call runs once on every subscriber of its queue.

``@app.task(broadcast=True)`` makes ``delay()`` write the call once, to its
queue's broadcast log (``stores/broadcast.py``), and return a
``BroadcastHandle``; workers pull it into their subscriber's lane and run it
there as a task (``worker/broadcasts.py``). ``join()`` waits for the outcome
of each subscriber the call was sent to.
"""
from __future__ import annotations

import asyncio
import datetime as _dt
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from .broker.durability import APP, CallSetting, keep_unconfirmed, name_broadcast
from .broker.keys import lane
from .errors import (BrokerError, ConfigurationError, DurabilityError, ResultTimeout,
                     task_failed)
from .handle import TaskHandle, check_running, check_timeout, status_of
from .options import check_positive_seconds
from .printable import own_logger, printable
from .sending import Sender, broadcast_failed, check_key_part
from .stores.broker import Broker
from .stores.names import read_names
from .stores.results import decode_result, readable_state
from .wire.message import Message, Progress, to_ms, to_seconds

if TYPE_CHECKING:
    from .stores.aio import AsyncBroker

#: The app's defaults: calls kept per queue for subscribers behind, and for how long (s).
DEFAULT_MAXLEN = 10_000
DEFAULT_TTL = 86_400.0
#: Most calls a queue's log may keep (a unit mistake past this).
MAX_MAXLEN = 10_000_000
#: Longest one blocking read of a subscriber's outcome lasts (Redis's cap is 5 s).
_WAIT_STEP = 5.0
#: Subscribers ``subscribers()`` lists at most unless told (the rest are counted, and
#: said: a queue's subscribers are names anyone with Redis access can add).
SUBSCRIBERS_MOST = 100_000
#: Names of the app's registry of lanes ``join()`` reads at most, looking for those
#: unsubscribed since the call that ran it (the rest are counted, and said).
LANES_READ = 10_000

logger = own_logger(__name__)


class Subscribers(List[str]):
    """The names ``BroadcastHandle.subscribers()`` lists (a list), and ``more``: how
    many more the call went to, not listed."""

    def __init__(self, names: Sequence[str], more: int = 0) -> None:
        super().__init__(names)
        self.more = more


@dataclass(frozen=True)
class Subscriber:
    """A subscriber of a queue's broadcasts.

    Attributes:
        name: the worker name it is (``minitask worker --name``).
        lag: calls sent that it has not pulled yet.
        last_seen: when one of its workers last looked for calls (UTC), if known.
    """

    name: str
    lag: int
    last_seen: Optional[_dt.datetime]


def check_subscriber(name: Any) -> str:
    """``name`` if it can name a subscriber (as a queue name can), else ConfigurationError."""
    check_key_part("subscriber", name)
    return str(name)


def broadcast_limits(options: Dict[str, Any], where: str) -> Tuple[int, int]:
    """The app options ``broadcast_maxlen`` and ``broadcast_ttl`` (seconds), checked:
    (maxlen, ttl in ms)."""
    maxlen = options.get("broadcast_maxlen", DEFAULT_MAXLEN)
    if type(maxlen) is not int or not 1 <= maxlen <= MAX_MAXLEN:
        raise ConfigurationError(f"{where}: broadcast_maxlen must be an int from 1 to "
                                 f"{MAX_MAXLEN}, got {maxlen!r}")
    ttl = check_positive_seconds(options.get("broadcast_ttl", DEFAULT_TTL), "broadcast_ttl",
                                 where)
    return maxlen, to_ms(ttl)


def send(sender: Sender, messages: Sequence[Message], result_ttl_ms: int,
         durability: CallSetting = APP) -> List["BroadcastHandle"]:
    """Check and encode every call, then write them to their queues' broadcast logs.

    Raises:
        ConfigurationError: a call has a delay or eta (broadcasts run when sent), or a
            bad ``durability``.
        DurabilityError: replicas did not confirm a queue's calls in time (named).
        The errors of ``Sender.prepare``; nothing is sent then.
    """
    if messages:
        sender.refuse_in_batch(f"send broadcast task {messages[0].task!r}")
    for message in messages:
        if message.flow is not None:
            raise ConfigurationError(f"task {message.task!r}: a broadcast call takes no "
                                     f"limit_key, debounce or expires")
        if message.eta_ms:
            raise ConfigurationError(f"task {message.task!r}: a broadcast call runs when it "
                                     f"is sent; it takes no delay or eta")
    policy = sender.durability_of(messages, durability)
    by_queue = sender.prepare(messages)
    broker = sender.broker()
    maxlen, ttl_ms = sender.broadcast_limits
    now_ms = sender.clock.now_ms()
    every = [entry[0] for entries in by_queue.values() for entry in entries]
    try:
        with keep_unconfirmed() as kept:  # a queue's calls unconfirmed: the others sent too
            done: List[str] = []
            for queue, entries in by_queue.items():
                ids = [entry[0] for entry in entries]
                try:
                    with kept.writing(ids):
                        broker.broadcasts.send(queue, [(i, body) for i, body, _, _ in entries],
                                               now_ms, maxlen=maxlen, ttl_ms=ttl_ms,
                                               durability=policy)
                except BrokerError as exc:  # told what Redis holds: the call(s) it names
                    raise broadcast_failed(exc, messages[0].task, queue, ids, done,
                                           every[len(done) + len(ids):], kept) from exc
                done += ids
        try:
            kept.raise_any()
        except DurabilityError as exc:  # every id written unconfirmed, the first named
            first = next(m for m in messages if m.id == exc.task_ids[0])
            raise name_broadcast(exc, first.task, first.queue, exc.task_ids) from exc
    finally:  # written (perhaps unconfirmed) or not: findable by id all the same
        broker.queues.register_queues(by_queue)
    return [BroadcastHandle(broker, m.queue, m.id, result_ttl_ms, sender.async_broker)
            for m in messages]


class BroadcastHandle(TaskHandle[Dict[str, Any]]):
    """One broadcast call: its id, and every subscriber's outcome.

    ``get(timeout)`` is ``join(timeout)``; ``status()`` sums the subscribers' up.
    """

    def __init__(self, broker: Broker, queue: str, call_id: str,
                 result_ttl_ms: int = 86_400_000,
                 async_broker: "Optional[Callable[[], AsyncBroker]]" = None) -> None:
        super().__init__(broker, queue, call_id, result_ttl_ms, async_broker)
        self.queue = queue

    def __repr__(self) -> str:
        return f"<BroadcastHandle {self.id} queue={self.queue!r}>"

    def subscribers(self, most: Optional[int] = None) -> Subscribers:
        """Who the call was sent to: the queue's subscribers at send time.

        Those subscribed before it was sent and still subscribed (a subscriber
        unsubscribed, or pruned after ``broadcast_ttl`` unseen, is left out). Once
        the call's record is gone (after ``broadcast_maxlen`` calls), the current
        subscribers (the furthest behind first). A bounded read: at most ``most``
        names, the earliest subscribed first, sorted; how many more there are is
        the list's ``more``, and a WARNING line says "and N more".

        Args:
            most: names listed at most (default ``SUBSCRIBERS_MOST``, 100,000).

        Returns:
            Subscriber names (a list), with ``more``.

        Raises:
            BrokerError: Redis could not be reached.
            ConfigurationError: ``most`` is not a whole number of 1 or more.
        """
        most = SUBSCRIBERS_MOST if most is None else most
        if not isinstance(most, int) or isinstance(most, bool) or most < 1:
            raise ConfigurationError(f"subscribers() on broadcast {self.id}: most must be "
                                     f"a whole number of 1 or more, got {most!r}")
        names, more = self._broker.broadcasts.names_page(self.queue, self.id, most)
        if names is None:
            rows, count = self._broker.broadcasts.few(self.queue, most)
            names, more = [cursor.name for cursor in rows], max(0, count - len(rows))
        if more:
            logger.warning("broadcast %s of queue %s: listed %d subscriber(s) and %d more "
                           "not listed (subscribers(most=...) lists more)", self.id,
                           printable(self.queue), len(names), more)
        return Subscribers(names, more)

    def join(self, timeout: Optional[float] = None,
             subscribers: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Wait until each subscriber has run the call; their outcomes by name.

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it takes.
            subscribers: wait for these names only; default: every subscriber
                of the queue when the call was sent, but for those unsubscribed
                since without having run it.

        Returns:
            Subscriber name -> the value its run returned, or a ``TaskFailed``
            (not raised) for a run that ended dead or cancelled.

        Raises:
            ResultTimeout: ``timeout`` passed first; it names who has not finished.
                Raised at once for a subscriber past the call that keeps no outcome
                (dropped before it pulled it, ``ignore_result``, expired).
            BrokerError: Redis could not be reached.
            ConfigurationError: ``timeout`` is not a number of seconds, 0 or more, or
                a name in ``subscribers`` never got the call.
        """
        names = self._to_join(timeout, subscribers)
        deadline = None if timeout is None else time.monotonic() + timeout
        outcomes = self._settled(names)
        for index, name in enumerate(names):
            while name not in outcomes:
                left = _WAIT_STEP if deadline is None else deadline - time.monotonic()
                body = self._results.wait_result(lane(self.queue, name), self.id,
                                                 min(max(left, 0.0), _WAIT_STEP))
                if body is not None:
                    outcomes[name] = self._outcome(body, name)
                    continue
                outcomes.update(self._settled([name]))
                if name not in outcomes and deadline is not None \
                        and time.monotonic() >= deadline:
                    raise self._timed_out(names, index, timeout)
        return {name: outcomes[name] for name in names}

    def _to_join(self, timeout: Optional[float],
                 subscribers: Optional[Sequence[str]]) -> List[str]:
        """The names ``join`` waits for, with ``timeout`` checked."""
        check_timeout(timeout, f"join() on broadcast {self.id}")
        sent_to = self._broker.broadcasts.sent_to(self.queue, self.id, subscribers)
        names = list(sent_to if subscribers is None else subscribers)
        if subscribers is not None:  # those read from Redis are checked as they are read
            for name in names:
                check_subscriber(name)
        # one unsubscribed since the call was sent got it if its lane has a run of it
        strangers = [name for name in dict.fromkeys(names) if name not in sent_to
                     and self._state(name) == "unknown"]
        if strangers:  # never sent the call: it would wait for them for ever
            raise ConfigurationError(
                f"join() on broadcast {self.id} of queue {self.queue!r}: "
                f"{', '.join(map(repr, strangers))} never got this call (it went to "
                f"{', '.join(map(repr, sent_to)) or 'no subscriber'}); a call reaches only "
                f"the subscribers of its queue when it is sent, and one that unsubscribed "
                f"before pulling it will never run it")
        if subscribers is None:
            # one unsubscribed since (minitask unsubscribe) is not waited for, unless it ran
            current = {cursor.name for cursor in self._broker.broadcasts.of(self.queue, names)}
            names = [name for name in names if name in current or self._ended(name)]
            names += [name for name in self._lanes() if name not in sent_to and self._ended(name)]
        return names

    def _lanes(self) -> List[str]:
        """The subscribers with a lane of this queue in the app's registry of lanes (a
        bounded read): those unsubscribed since the call are found there."""
        prefix = f"{self.queue}:"
        key = self._broker.queues.app_keys.lanes
        lanes, left = read_names(self._broker.transport, [key], LANES_READ)
        if left:
            logger.warning("join() on broadcast %s of queue %s: read %d name(s) of the app's "
                           "registry of lanes (%s) and not %d more: a subscriber unsubscribed "
                           "since the call whose lane is among those is not waited for "
                           "(join(subscribers=[...]) names it)", self.id,
                           printable(self.queue), len(lanes), key, left)
        return sorted({name[len(prefix):] for name in lanes if name.startswith(prefix)
                       and name[len(prefix):]})

    def _settled(self, names: Sequence[str]) -> Dict[str, Any]:
        """The outcomes of those of ``names`` past the call; ResultTimeout at once for
        one that will never have one, rather than waiting for ever.

        Its cursor is read before its lane: a cursor past the call and a lane that
        does not know it means it ran and kept nothing, or never got it.
        """
        found: Dict[str, Any] = {}
        never = []
        for name in self._broker.broadcasts.passed(self.queue, self.id, names):
            state, body = self._results.state(lane(self.queue, name), self.id)
            readable_state((state, body), self.id)  # a key of another type: said, not waited
            if state == "finished" and body is not None:
                found[name] = self._outcome(body, name)
            elif state == "unknown":
                never.append(name)
        if never:
            raise ResultTimeout(
                f"broadcast {self.id} of queue {self.queue!r} will never have an outcome on "
                f"subscriber(s) {', '.join(never)}: each is past the call and keeps none (it "
                f"was dropped over broadcast_maxlen or broadcast_ttl before they pulled it, the "
                f"task is ignore_result, its result expired after result_ttl, or another's data "
                f"moved their cursor past it); join the others with subscribers=[...]")
        return found

    def _timed_out(self, names: List[str], index: int,
                   timeout: Optional[float]) -> ResultTimeout:
        later = [n for n in names[index + 1:] if not self._ended(n)]
        return ResultTimeout(self._late([names[index], *later], timeout))

    async def ajoin(self, timeout: Optional[float] = None,
                    subscribers: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Like ``join()``, awaited from a coroutine.

        Each wait is a blocking command on the app's async client, holding no
        thread (a handle with no async broker uses a thread
        of the loop's default executor). The short lookups of who to wait for
        and, on a timeout, who is late, are synchronous.

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it takes.
            subscribers: wait for these names only (default: as ``join()``).

        Returns:
            Subscriber name -> the value its run returned, or a ``TaskFailed``.

        Raises:
            ResultTimeout, BrokerError, ConfigurationError: as ``join()``.
        """
        try:
            broker = self._aio()
        except ConfigurationError:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, self.join, timeout, subscribers)
        names = self._to_join(timeout, subscribers)
        deadline = None if timeout is None else time.monotonic() + timeout
        outcomes = self._settled(names)
        for index, name in enumerate(names):
            while name not in outcomes:
                left = _WAIT_STEP if deadline is None else deadline - time.monotonic()
                body = await broker.wait_result(lane(self.queue, name), self.id,
                                                min(max(left, 0.0), _WAIT_STEP))
                if body is not None:
                    outcomes[name] = self._outcome(body, name)
                    continue
                outcomes.update(self._settled([name]))
                if name not in outcomes and deadline is not None \
                        and time.monotonic() >= deadline:
                    raise self._timed_out(names, index, timeout)
        return {name: outcomes[name] for name in names}

    def get(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The same as ``join(timeout)``: every subscriber's outcome, by name.

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it takes.

        Returns:
            Subscriber name -> the value its run returned, or a ``TaskFailed``.

        Raises:
            ResultTimeout, BrokerError, ConfigurationError: as ``join()``.
        """
        return self.join(timeout)

    def status(self) -> str:
        """The call's status, summed up over its subscribers.

        ``succeeded`` once every subscriber succeeded, ``failed`` once all ended
        and one did not, ``unknown`` for a call never seen (or forgotten: every
        subscriber not ended is past it and keeps no outcome, as with
        ``ignore_result``), else where the first unfinished subscriber's run is
        (``queued``, ``running``, ``retrying``).

        Returns:
            One of the statuses of ``TaskHandle.status()``.

        Raises:
            BrokerError: Redis could not be reached.
        """
        names = self._broker.broadcasts.names(self.queue, self.id)
        if names is None:
            return "unknown"
        # read before the lanes (as join does): past it and unknown there = no outcome kept
        passed = set(self._broker.broadcasts.passed(self.queue, self.id, names))
        ended = []
        for name in names:
            state, outcome = self._results.state(lane(self.queue, name), self.id)
            if state == "finished":
                ended.append(status_of(state, outcome))
            elif state in ("dead", "unreadable"):  # unreadable: as status_of says it
                ended.append("failed")
            elif state == "unknown" and name in passed:
                ended.append("unknown")
            else:  # not pulled yet (unknown in its lane), or on its way
                return {"unknown": "queued", "scheduled": "retrying"}.get(state, state)
        if "unknown" in ended:
            return "unknown"
        return "succeeded" if all(s == "succeeded" for s in ended) else "failed"

    def cancel(self, running: bool = False) -> bool:
        """Do nothing: a broadcast call cannot be withdrawn once sent.

        Args:
            running: ignored (but a bool).

        Returns:
            False, always.

        Raises:
            ConfigurationError: ``running`` is not a bool, as for any handle.
        """
        check_running(running, f"cancel() of broadcast {self.id}")
        return False

    def progress(self) -> Optional[Progress]:
        """Read nothing: each subscriber runs the call, with no one progress.

        Returns:
            None, always.
        """
        return None

    # The async twins, in the loop's default executor like ``ajoin``.

    async def aget(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The same as ``ajoin(timeout)``.

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it takes.

        Returns:
            Subscriber name -> the value its run returned, or a ``TaskFailed``.

        Raises:
            ResultTimeout, BrokerError, ConfigurationError: as ``join()``.
        """
        return await self.ajoin(timeout)

    async def astatus(self) -> str:
        """Like ``status()``, awaited (in the loop's default executor).

        Returns:
            One of the statuses of ``TaskHandle.status()``.

        Raises:
            BrokerError: Redis could not be reached.
        """
        return await asyncio.get_running_loop().run_in_executor(None, self.status)

    async def acancel(self, running: bool = False) -> bool:
        """Do nothing, as ``cancel()``: a broadcast call cannot be withdrawn.

        Args:
            running: ignored.

        Returns:
            False, always.
        """
        check_running(running, f"acancel() of broadcast {self.id}")
        return False

    async def aprogress(self) -> Optional[Progress]:
        """Read nothing, as ``progress()``.

        Returns:
            None, always.
        """
        return None

    def _ended(self, name: str) -> bool:
        """Whether subscriber ``name``'s run has an outcome (or ended dead)."""
        return self._state(name) in ("finished", "dead", "unreadable")

    def _state(self, name: str) -> str:
        """Where subscriber ``name``'s run of the call is ("unknown": it has none)."""
        return str(self._results.state(lane(self.queue, name), self.id)[0])

    def _outcome(self, body: bytes, name: str) -> Any:
        queue = lane(self.queue, name)  # a DecodeError names the task and the key
        outcome = decode_result(body, self.id, self._results.keys(queue).result(self.id))
        if outcome.status == "succeeded":
            return outcome.value
        return task_failed(self.id, outcome)

    def _late(self, pending: Sequence[str], timeout: Optional[float]) -> str:
        """Who has not finished, and when each was last seen."""
        seen = {c.name: c for c in self._broker.broadcasts.of(self.queue, list(pending))}
        # a cursor past the call whose lane has no run of it: no pull wrote it (planted)
        ahead = self._broker.broadcasts.cursor_past(self.queue, self.id, pending)[0] or ()
        parts = []
        for name in pending:
            cursor = seen.get(name)
            if cursor is None:
                parts.append(f"{name} (not subscribed any more)")
                continue
            where = f"{cursor.lag} call(s) behind"
            if name in ahead and self._state(name) == "unknown":
                where = ("it has not run this call: its cursor was set past it, not by a "
                         "pull; its next pull sets it back")
            ago = None if cursor.last_seen_ms is None else time.time() - to_seconds(
                cursor.last_seen_ms)
            parts.append(f"{name} (never seen, {where})" if ago is None else
                         f"{name} (last seen {max(0.0, ago):.1f} s ago, {where})")
        return (f"broadcast {self.id} of queue {self.queue!r} did not finish within "
                f"{timeout} s on {len(pending)} subscriber(s): {', '.join(parts)}")
