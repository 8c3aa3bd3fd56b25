"""Riding out Redis outages: every Redis step of the worker goes through here.

A read (fetch, wait) gives up at a stop; an outcome's write goes on until it succeeds
(the ACL refusing it: ``visibility_timeout``); one replicas did not confirm is not
written again. A fetch refused for one queue's data sets it aside (``QueueRefusals``).
"""
from __future__ import annotations

import ctypes
import json
import multiprocessing
import random
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

from ..broker.durability import keep_unconfirmed
from ..errors import BrokerError, DurabilityError, MinitaskError
from ..log_throttle import LogThrottle
from ..printable import cut_text, own_logger, printable
from ..stores.foreign import foreign
from .unconfirmed import WRITES

logger = own_logger(__name__)

#: Longest pause between reconnection attempts while Redis is away.
MAX_BACKOFF = 5.0
#: What ``persist`` returns for a write whose replies were lost with its confirmation
#: (a socket timeout cut WAIT short): Redis made it, replicas did not confirm it.
UNCONFIRMED = object()
#: Longest a queue whose fetch Redis refuses is set aside before it is tried again (s).
MAX_ASIDE = MAX_BACKOFF
#: Least time between two warnings about one refused queue (s): the refusals between
#: them are counted, and the next warning says how many.
SAY_AGAIN_AFTER = 60.0
#: Refused queues a worker's record names at most, and the most characters of the
#: refusal it says for each (``QueueRefusals.stalled``).
STALLED_SAID = 10
STALLED_REASON_MOST = 300
#: How long a process pool's child rides an outage its supervisor does not see
#: before it says so itself (s).
ALONE_AFTER = 2 * MAX_BACKOFF
#: The ``BrokerError.reason`` of a client's own connection pool that stayed full for
#: its whole wait (``broker.pools.PoolExhausted``): no refusal of Redis's, and, as a
#: lost connection, ridden out with backoff, never given up on.
POOL_EXHAUSTED = "pool exhausted"
#: The reasons a step rides out as an outage: it is retried, never set aside.
RIDDEN_OUT = ("unreachable", POOL_EXHAUSTED)


class _Outage:
    """Redis away, as this process sees it: the first step to lose it says so, and the
    last to get it back; the worker's other threads (heartbeat, cancel watch, orders)
    ride the same outage quietly, so one outage is one ERROR and one WARNING.

    A process pool's children ride it quietly too (``quiet``): their supervisor's
    orders listener, which waits on Redis as long as the worker runs, says it for the
    worker, and tells them it rides one (``shared``, memory they inherit). A child
    that still cannot reach Redis after ``ALONE_AFTER`` while its supervisor can (a
    failure of its own: new connections refused, say) says so after all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting = 0       # steps riding it out now
        self._since = 0.0
        self._said = False      # this outage was said (a quiet child's: not yet)
        #: Said at DEBUG only: this process is a child of a pool whose supervisor speaks.
        self.quiet = False
        #: A process pool's (``share_outages``): 1 while its supervisor rides an outage.
        self.shared: Any = None

    def lost(self, what: str, exc: BaseException) -> None:
        with self._lock:
            first = self._waiting == 0
            self._waiting += 1
            if first:
                self._since = time.monotonic()
                self._said = not self.quiet
                if self.shared is not None and not self.quiet:
                    self.shared.value = 1
        if first and not self.quiet:
            logger.error("lost Redis while trying to %s: %s; retrying with backoff", what, exc)
        else:
            logger.debug("lost Redis too while trying to %s: %s", what, exc)

    def still(self, what: str, exc: BaseException) -> None:
        """A step riding the outage failed again: a quiet child whose supervisor reaches
        Redis says so once the outage has lasted ``ALONE_AFTER``."""
        if self._said or self.shared is None:
            return
        with self._lock:
            say = (not self._said and self._waiting > 0 and self.shared.value == 0
                   and time.monotonic() - self._since >= ALONE_AFTER)
            if say:
                self._said = True
        if say:
            logger.error("lost Redis while trying to %s: %s; retrying with backoff (in "
                         "this child of the pool only: its supervisor reaches Redis)",
                         what, exc)

    def back(self, what: str, failures: int) -> None:
        with self._lock:
            self._waiting -= 1
            last = self._waiting == 0
            lasted = time.monotonic() - self._since
            said = self._said
            if last:
                self._ended()
        if last and said:
            logger.warning("Redis is back after %.1f s (%s, after %d failed tries)", lasted,
                           what, failures)
        else:
            logger.debug("Redis is back for %s after %d failed tries", what, failures)

    def left(self) -> None:
        """A step gave up waiting (its worker stops): it no longer rides the outage."""
        with self._lock:
            self._waiting -= 1
            if self._waiting == 0:
                self._ended()

    def _ended(self) -> None:
        """(Under the lock) no step rides the outage any more."""
        self._said = False
        if self.shared is not None and not self.quiet:
            self.shared.value = 0


_OUTAGE = _Outage()


def share_outages() -> None:
    """In a process pool's supervisor, before it forks a child: memory the children
    inherit, where it says it rides an outage (made once)."""
    if _OUTAGE.shared is None:
        _OUTAGE.shared = multiprocessing.RawValue(ctypes.c_int, 0)
    WRITES.share()  # (its children's unconfirmed writes: said once for the worker)


def ride_outages_quietly() -> None:
    """In a process pool's child, first thing: its supervisor says each outage for the
    worker. The state forked with it is the supervisor's (its steps riding an outage
    then, its lock, maybe held by another thread): the child starts afresh."""
    global _OUTAGE
    shared = _OUTAGE.shared
    _OUTAGE = _Outage()
    _OUTAGE.shared, _OUTAGE.quiet = shared, True


class Backoff:
    """Capped exponential backoff with full jitter; logs only when the state changes."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failures = 0
        self._unreachable = False
        self._exhausted = False  # the client's pool, not Redis: said as such once back
        self._moving = False  # slots moving (a reshard): said at info once it ran

    def failed(self, exc: BaseException) -> float:
        if self.failures == 0:
            self.what = getattr(exc, "worker_step", None) or self.what  # (a schedule fire)
            reason = getattr(exc, "reason", "unreachable")
            self._exhausted = reason == POOL_EXHAUSTED
            if reason == "unreachable":
                self._unreachable = True
                _OUTAGE.lost(self.what, exc)
            elif reason == POOL_EXHAUSTED:  # the client's limit: Redis refused nothing
                logger.error("the Redis client's connection pool is exhausted (every "
                             "connection in use, max_connections reached) while trying to "
                             "%s: %s; retrying with backoff", self.what, exc)
            elif reason == "unconfirmed":  # written: only the replicas fell short
                logger.error("Redis wrote but replicas did not confirm it in time, while "
                             "trying to %s: %s; retrying with backoff", self.what, exc)
            elif getattr(exc, "moving", False):  # slots moving: nothing refused or lost
                self._moving = True
                logger.warning("Redis Cluster's slots are moving (a reshard or a failover: "
                               "redirected past the client's limit) while trying to %s; "
                               "it did not run, retrying with backoff: %s", self.what, exc)
            else:  # Redis answered, with a refusal: say what it is, not "lost Redis"
                logger.error("Redis refused to %s: %s; retrying with backoff", self.what, exc)
        elif self._unreachable:
            _OUTAGE.still(self.what, exc)
        self.failures += 1
        return random.uniform(0, min(MAX_BACKOFF, 0.05 * 2 ** self.failures))

    def succeeded(self) -> None:
        if self._unreachable:
            _OUTAGE.back(self.what, self.failures)
        elif self._exhausted:
            logger.warning("the Redis client's connection pool has a free connection again "
                           "(%s) after %d failed tries", self.what, self.failures)
        elif self._moving:
            logger.info("Redis Cluster ran it (%s) after %d tries as its slots moved: "
                        "nothing was lost", self.what, self.failures)
        elif self.failures:
            logger.warning("Redis is back (%s) after %d failed tries", self.what, self.failures)
        self.failures = 0
        self._unreachable = self._exhausted = self._moving = False

    def gave_up(self) -> None:
        """The step stops waiting without Redis coming back (its worker stops)."""
        if self._unreachable:
            _OUTAGE.left()
        self.failures = 0
        self._unreachable = self._exhausted = self._moving = False


@dataclass
class _Refused:
    """A queue set aside: since when, how often refused, until when it is set aside
    (monotonic seconds)."""

    since: float
    until: float = 0.0
    refusals: int = 0
    reason: str = ""  # Redis's last refusal, naming the key


class QueueRefusals:
    """The queues of one worker whose fetch Redis refuses for their own data (a key of
    another type, a value a script cannot read or that stops it with a runtime error:
    ``stores.foreign.foreign``).

    That is no outage, and waiting on the whole fetch would not end it: the queue is
    set aside, with a backoff of its own (at most ``MAX_ASIDE``), tried again by the
    first fetch after it, and the worker's other queues are fetched meanwhile as
    ever. A refusal is said once as a WARNING naming the queue and the key (again at
    most every ``SAY_AGAIN_AFTER`` seconds, with the refusals since), and the first
    fetch served again once the key is fixed says so. Held in one process: nothing a
    crash could leave held, in Redis or elsewhere.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_queue: Dict[str, _Refused] = {}  # (read as is where each task asks: no call)
        self._said = LogThrottle(SAY_AGAIN_AFTER)  # refusals since a queue's last warning

    def __bool__(self) -> bool:
        """Any queue refused (a fetch that meets none pays one check)."""
        return bool(self.by_queue)

    def known(self, queue: str) -> bool:
        """Refused, and not served since: no fetch from it rides behind other calls
        (acks, waits, fires), only a fetch of its own, once set aside no more."""
        return queue in self.by_queue

    def aside(self, queue: str) -> bool:
        """Set aside now: the fetch passes over it, to the next queue."""
        refused = self.by_queue.get(queue)
        return refused is not None and time.monotonic() < refused.until

    @staticmethod
    def refusal(exc: BaseException) -> bool:
        """Whether ``exc`` refuses a fetch for the queue's own data: a key of another
        type (WRONGTYPE), one of minitask's key guards ("minitask key", lib.lua), or
        any other runtime error of the fetch script (reason ``script``: most likely a
        value in the queue's keys it could not read). Each fetch script reads the
        keys of one queue only, so its error is that queue's: the other queues'
        fetches are no business of it.

        Else an outage, or a refusal of the whole server, ridden out as ever: setting
        each queue aside for it would blame their keys. Those have reasons of their
        own (``broker.refusals.broker_reason`` tells them first, raised in a script or not):
        NOREPLICAS, MISCONF, MASTERDOWN, BUSY (``error``), an ACL (``permission``),
        OOM (``out of memory``), READONLY (``read-only``), LOADING (``unreachable``);
        NOSCRIPT never comes here (the transport loads the script again)."""
        return isinstance(exc, BrokerError) and foreign(exc)

    def refused(self, queue: str, exc: BaseException) -> None:
        """Redis refused a fetch from ``queue`` (``refusal(exc)``): set it aside."""
        now = time.monotonic()
        with self._lock:
            refused = self.by_queue.get(queue)
            first = refused is None
            if refused is None:
                refused = self.by_queue[queue] = _Refused(since=now)
                self._said.forget(queue)  # (its first refusal is said at once)
            refused.refusals += 1
            refused.reason = cut_text(printable(str(exc)), STALLED_REASON_MOST)
            pause = min(MAX_ASIDE, 0.1 * 2 ** min(refused.refusals - 1, 16))
            refused.until = now + random.uniform(pause / 2, pause)
            unsaid, lasted = self._said.note(queue), now - refused.since
        if first:
            logger.warning("queue %r set aside: %s; its tasks wait there, this worker serves "
                           "its other queues and tries it again with backoff (at most every "
                           "%.0f s) until the key is fixed", queue, printable(str(exc)),
                           MAX_ASIDE)
        elif unsaid:
            logger.warning("queue %r still set aside after %.0f s: Redis refused %d fetch(es) "
                           "from it since the last warning: %s", queue, lasted, unsaid,
                           printable(str(exc)))

    def stalled(self) -> str:
        """The queues refused now, as the worker's record says them (JSON: queue ->
        Redis's refusal, naming the key), for ``minitask status`` and the dashboard to
        say the queue is stalled and why, not only the log: at most ``STALLED_SAID``
        queues, each reason at most ``STALLED_REASON_MOST`` characters; '{}' for none."""
        with self._lock:
            said = {queue: refused.reason for queue, refused
                    in list(self.by_queue.items())[:STALLED_SAID]}
        return json.dumps(said) if said else "{}"

    def served(self, queue: str, sent: float) -> None:
        """A fetch from ``queue`` sent at ``sent`` (monotonic) succeeded: if it was set
        aside before then, it is served again. One sent before the refusal (another
        thread's, in flight) proves nothing of the keys."""
        with self._lock:
            refused = self.by_queue.get(queue)
            if refused is None or refused.since > sent:
                return
            del self.by_queue[queue]
        logger.warning("queue %r served again after %.1f s set aside (%d refused fetch(es)): "
                       "its keys were fixed", queue, time.monotonic() - refused.since,
                       refused.refusals)


def beat_step(step: Callable[[], Any], refusals: Set[str]) -> None:
    """Run a step of a worker's heartbeat: an outage is raised (the heartbeat backs
    off), a refusal logged once (``refusals``: those said) and the other steps go on."""
    try:
        step()
    except BrokerError as exc:
        if exc.reason in RIDDEN_OUT:
            raise
        if str(exc) not in refusals:
            refusals.add(str(exc))
            logger.error("heartbeat: %s; its other steps go on", exc)


def guarded(step: Callable[[], Any], what: str, stop: threading.Event) -> Any:
    """Run a Redis step, riding out outages with backoff instead of crashing;
    None once ``stop`` is set while Redis is away."""
    backoff: Optional[Backoff] = None  # made at the first failure: most steps have none
    while True:
        try:
            result = step()
        except BrokerError as exc:
            if backoff is None:
                backoff = Backoff(what)
            pause = backoff.failed(exc)
            if stop.wait(pause):
                backoff.gave_up()
                return None
            continue
        if backoff is not None:
            backoff.succeeded()
        return result


def through_busy(step: Callable[[], Any], what: str, stop: threading.Event) -> None:
    """Run a start-up step (idempotent), waiting out Redis's BUSY (a slow script holds
    the server: it ends) with backoff, as a running worker's ``guarded`` steps do; any
    other failure is raised: a worker that cannot start says why. Returns once the step
    ran, or ``stop`` is set meanwhile."""
    backoff: Optional[Backoff] = None
    while True:
        try:
            step()
        except BrokerError as exc:
            if not str(exc.__cause__ or exc).startswith("BUSY"):
                raise
            backoff = backoff or Backoff(what)
            if stop.wait(backoff.failed(exc)):
                backoff.gave_up()
                return
            continue
        if backoff is not None:
            backoff.succeeded()
        return


class RefusedTooLong(MinitaskError):
    """The ACL refused an outcome write for ``bound`` s (``persist``; ``acl_steps``)."""

    def __init__(self, what: str, error: BrokerError, bound: float) -> None:
        super().__init__(f"Redis's ACL refused to {what} for {bound:.0f} s: {error}")
        self.error, self.bound = error, bound


_WAITING = threading.local()  # ``hook``: called as a persist of the thread backs off


@contextmanager
def waiting_in(hook: Callable[[], None]) -> Iterator[None]:
    """Call ``hook`` as a ``persist`` of this thread backs off (``pools/recording.py``)."""
    _WAITING.hook = hook
    try:
        yield
    finally:
        _WAITING.hook = None


def persist(step: Callable[[], Any], what: str, final: Tuple[str, ...] = (),
            refused_for: Optional[float] = None) -> Any:
    """Run an outcome's write until it succeeds, backing off while Redis is away (a stop
    does not end it); its value. One replicas did not confirm in time is logged, not
    raised (``keep_unconfirmed``): the step goes on with what its scripts answered (a
    group complete: its body is sent), a WAIT the socket timeout cut short too;
    UNCONFIRMED when the confirmation was raised, without replies. A refusal of a
    ``final`` reason is raised. One the ACL refuses (``permission``) is retried for
    ``refused_for`` s of refusals in a row, then ``RefusedTooLong``: no slot waits for
    ever (an ACL put back within it goes unseen)."""
    backoff: Optional[Backoff] = None  # made at the first failure: most writes have none
    unsure: List[DurabilityError] = []  # every attempt's: a retry keeps what one kept
    refused_since: Optional[float] = None
    while True:
        try:
            # the block covers the step alone, not the worker's log lines (a handler sends)
            with keep_unconfirmed() as kept:
                try:
                    result = step()
                finally:
                    unsure += kept
        except DurabilityError as exc:  # raised, not kept: no reply to act on
            unconfirmed(what, unsure[0] if unsure else exc)
            return UNCONFIRMED
        except BrokerError as exc:
            if exc.reason != "permission" or refused_for is None:
                refused_since = None  # the bound is of refusals in a row
            else:
                refused_since = refused_since or time.monotonic()
            left = (MAX_BACKOFF if refused_since is None or refused_for is None  # (s to
                    else refused_since + refused_for - time.monotonic())  # the bound)
            if exc.reason in final or left <= 0:
                if backoff is not None:
                    backoff.gave_up()
                if unsure:  # an earlier attempt's write stands, unconfirmed
                    unconfirmed(what, unsure[0])
                if exc.reason not in final:
                    raise RefusedTooLong(what, exc, refused_for or 0.0) from exc
                raise
            if backoff is None:
                backoff = Backoff(what)
                hook = getattr(_WAITING, "hook", None)
                if hook is not None and exc.reason != "unconfirmed":  # (replicas: not
                    hook()  # this thread's alone; confirmations are capped, durability.rst)
            time.sleep(min(backoff.failed(exc), left))  # (a refusal's last try: at its bound)
            continue
        if backoff is not None:
            backoff.succeeded()
        if unsure:
            unconfirmed(what, unsure[0])
        elif WRITES.state[0]:  # confirmed again (by any process): the outage is over
            WRITES.confirmed()
        return result


def unconfirmed_at_start(*steps: Callable[[], Any]) -> None:
    """Run a worker's start-up writes (its schedules, its broadcast subscriptions). One
    replicas did not confirm in time stops no start (``keep_unconfirmed``): Redis made
    it, and the worker serves its queues while a replica is down or behind, as the
    warning of ``check_redis`` says it will; the shortfall is said once, a warning."""
    with keep_unconfirmed() as unsure:
        for step in steps:
            step()
    if unsure:
        more = f" (and {len(unsure) - 1} other write(s))" if len(unsure) > 1 else ""
        logger.warning("Redis wrote but replicas did not confirm it in time: %s%s; the worker "
                       "starts all the same (a failover may lose these writes: a worker "
                       "makes them again as it starts)", unsure[0], more)


def unconfirmed(what: str, exc: BaseException) -> None:
    """Say that a worker's write is on the primary only (at least once still holds):
    once an outage, then counted (``unconfirmed.WRITES``)."""
    WRITES.seen(what, exc)


@dataclass
class Refused:
    """An outcome's write Redis refused for the queue's own data (``unless_refused``)."""

    error: BrokerError

    def say(self, what: str) -> None:
        logger.error("could not %s: Redis refused it for data of the queue that minitask "
                     "did not write (%s); not retried: the worker no longer holds the task, "
                     "which is delivered again once its lease expires", what, self.error)


def unless_refused(step: Callable[[], Any]) -> Callable[[], Any]:
    """``step``, returning ``Refused`` instead of raising when Redis refuses it for the
    queue's own data (``QueueRefusals.refusal``: a key of another type, a key guard;
    the outcome scripts move the first aside, lib.lua): waiting would not end it, and
    retrying it for ever would hold the task's slot for good. An outage, or a refusal
    of the whole server, is still raised (retried)."""
    def once() -> Any:
        try:
            return step()
        except BrokerError as exc:
            if not QueueRefusals.refusal(exc):
                raise
            return Refused(exc)
    return once
