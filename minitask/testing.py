"""Testing your tasks: an app on a private in-memory broker, drained in-process.

::

    from minitask.testing import drain, isolated

    def test_receipt_is_retried_then_sent():
        with isolated(app):
            handle = send_receipt.delay(1001, "ann@example.com")
            drain(app, advance=5)      # runs it, and its retry due within 5 s
            assert handle.get(timeout=1).startswith("emailed")

``isolated`` gives the app a fresh fakeredis server (with Lua, so the very
scripts a real Redis runs) and a clock that moves only when ``drain`` moves
it, so delays, retries and backoffs are tested without waiting for them.
Needs ``pip install "minitask[testing]"``.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Iterator, List, Optional

from .app import Minitask
from .broker.durability import Durability
from .errors import ConfigurationError
from .printable import own_logger
from .wire.message import to_ms, wall_ms

logger = own_logger(__name__)

#: ``drain`` gives up after running this many tasks: a task that keeps enqueueing
#: work due at once would otherwise never let it return.
DRAIN_LIMIT = 100_000
#: The subscriber ``drain`` runs broadcast calls as: ``isolated`` subscribes it to
#: every broadcast queue of the app, so each broadcast call runs once, in-process.
SUBSCRIBER = "testing"


class TestClock:
    """Time as an isolated app sees it: starts at the real time, then moves only
    when ``drain(advance=...)`` (or a test, with ``advance``) moves it."""

    __test__ = False  # not a test class, whatever pytest's name rules say

    def __init__(self, now_ms: Optional[int] = None) -> None:
        self.ms = wall_ms() if now_ms is None else now_ms

    def now_ms(self) -> int:
        return self.ms

    def advance(self, seconds: float) -> None:
        """Move time forward; moving it back is refused (leases and due times would lie)."""
        if seconds < 0:
            raise ConfigurationError(f"time only moves forward, got {seconds!r} s")
        self.ms += to_ms(seconds)


def _fake_client() -> object:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import fakeredis
    except ImportError as exc:
        raise ConfigurationError('minitask.testing needs fakeredis with Lua: pip install '
                                 '"minitask[testing]"') from exc
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


@contextmanager
def isolated(app: Minitask) -> Iterator[Minitask]:
    """Point ``app`` at a private in-memory broker for the duration of the block.

    Every task of the app (and every handle) uses a fresh fakeredis server with
    Lua and a ``TestClock``; on exit the app's own broker and clock come back,
    and nothing was written to them. Blocks may nest.

    Yields:
        The app itself.

    Raises:
        ConfigurationError: fakeredis (with Lua) is not installed.
    """
    client = _fake_client()
    clock = TestClock()
    # The app is the user's own object: swap what it reaches Redis and time through,
    # and put it all back, so that code under test needs no change at all.
    # An in-memory server has no replicas: the app's durability is set aside too.
    saved = (app._broker_setting, app._broker, app.clock, app._sender.clock, app.durability,
             app._sender.durability)
    app._broker_setting, app._broker = client, None  # type: ignore[assignment]
    app.clock = app._sender.clock = clock
    app.durability = app._sender.durability = Durability()
    try:
        _subscribe(app)
        yield app
    finally:
        try:
            app.close()
        finally:
            (app._broker_setting, app._broker, app.clock, app._sender.clock, app.durability,
             app._sender.durability) = saved


def drain(app: Minitask, *, advance: float = 0.0) -> int:
    """Run, in this thread, every task that is ready or falls due within ``advance``
    seconds, including what those tasks enqueue and their retries; returns how
    many attempts ran (a retried task counts each attempt).

    Time moves to each due time in turn, then to ``advance`` seconds after the
    start, so a retry backoff or an ``apply_in`` within the window runs, in the
    order it falls due. Failures end as they would on a worker (retry, dead
    letter): look at them through handles or ``app.dead_letters()``.

    Args:
        app: the app; inside ``isolated(app)`` when ``advance`` is above 0.
        advance: seconds to move time forward, 0 or more.

    Raises:
        ConfigurationError: ``advance`` is negative, or above 0 outside ``isolated``.
        RuntimeError: more than ``DRAIN_LIMIT`` attempts ran (a task that keeps
            enqueueing work due at once).
        BrokerError: Redis could not be reached (outside ``isolated``).
    """
    if not isinstance(advance, (int, float)) or advance < 0:
        raise ConfigurationError(f"drain(advance=...) takes 0 or more seconds, got {advance!r}")
    clock = app.clock
    if advance and not isinstance(clock, TestClock):
        raise ConfigurationError("drain(advance=...) moves time, which only an isolated app "
                                 "allows: call it inside minitask.testing.isolated(app)")
    target_ms = clock.now_ms() + to_ms(advance)
    ran = 0
    _subscribe(app)
    while True:
        queues = _queues(app)
        worker = app.worker(queues=queues, burst=True, subscriber=SUBSCRIBER)
        while worker.run_once():
            ran += 1
            if ran > DRAIN_LIMIT:
                raise RuntimeError(f"drain() ran {DRAIN_LIMIT} attempts and work is still "
                                   f"ready: does a task keep enqueueing more?")
        if _queues(app) != queues:
            continue  # a task sent work to a queue this worker did not serve
        if not isinstance(clock, TestClock):
            return ran
        due = [ms for ms in (app.broker.admin.next_due_ms(q) for q in queues)
               if ms is not None]
        if not due or min(due) > target_ms:
            break
        clock.ms = max(clock.ms, min(due))
    clock.ms = max(clock.ms, target_ms)
    return ran


def _queues(app: Minitask) -> List[str]:
    """The app's queues: those its tasks declare and any a call was sent to (not the
    subscribers' lanes: a worker serves those of its broadcast queues itself)."""
    known = {queue for queue in app.broker.queues.queue_names() if ":" not in queue}
    return sorted(known | set(app.worker_queues()))


def _subscribe(app: Minitask) -> None:
    """Subscribe ``SUBSCRIBER`` to the app's broadcast queues (from now on)."""
    for queue in sorted({t.queue for t in app.tasks.values() if t.options.broadcast}):
        app.broker.broadcasts.subscribe(queue, SUBSCRIBER, app.clock.now_ms())
