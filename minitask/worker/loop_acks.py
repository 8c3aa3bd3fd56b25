"""The asyncio pool's outcomes recorded from its event loop, never blocking it.

A success of a plain task (no workflow, no progress to write, no ``task_success``
hook, no write for replicas to confirm, a worker of one queue) costs the pool no
thread: its ack is put aside as a batch's (``Recorder.put_aside``), then sent with
the fetch of the slot's next task (ack_fetch.lua, the same call the recording
threads send) on an asyncio connection of the loop's own; the reply read, the
task it leased starts in the same slot. A hop to a recording thread and back
cost more worker CPU than the rest of an ``async def`` task's round.

Anything else goes the way it always went, on a recording thread, and so does any
failure of the loop's round trip (an outage, a script Redis has not loaded yet, a
refusal, a timeout): the outcomes are put back and recorded there, through outages
(``Recorder.record_waiting``), as if the loop had never tried.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, NamedTuple, Optional, Set

from redis.exceptions import NoScriptError, ResponseError

from ..errors import BrokerError
from ..printable import own_logger
from ..stores.aio import Unmirrored, in_resp2, twin_of
from ..stores.queue import FetchResult
from ..wire.message import Message
from .broadcasts import BroadcastSource
from .host import Host
from .leases import Holdings, Job
from .outcome_batches import note_refused, note_unanswered, recorded
from .outcomes import Recorder
from .progress import ProgressWriter
from .sources import NOTHING, QueueSource
from .ticks import TickSource

logger = own_logger(__name__)

#: Seconds the loop leaves outcomes to the recording threads after its round trip
#: failed (an outage: they ride it, with backoff, and the loop does not race them).
REST = 1.0
#: Most connections the loop opens to Redis: one a round trip in flight, as many as
#: the recording threads would have had twice over (a pool of 10,000 slots whose
#: attempts all end at once must not open 10,000).
MOST_LINKS = 8
#: The mark ``LoopLink.exchange`` sets on the error of a round trip that failed once
#: its command was written (a timeout, a connection lost): Redis may have run it. On
#: the error itself: a loop's round trips run side by side.
WRITTEN = "minitask_written"


class Answer(NamedTuple):
    """What the loop's round trip leaves the slot to do. ``how``: "run" (``job`` next,
    or none: the slot goes back), "next" (a recording thread finds the next job),
    "flush" (it records the outcomes put back, then finds the next job), "take" (it
    holds ``result``, which needs Redis calls of its own, then runs what it leased);
    ``cancelled``: the attempt's task was cancelled meanwhile (the round trip ran on)."""

    how: str
    job: Optional[Job] = None
    result: FetchResult = NOTHING
    cancelled: bool = False


class LoopLink:
    """Connections of one event loop to the broker's Redis for packed commands: one
    written, its reply read, on a connection no other call uses meanwhile."""

    def __init__(self, make: Callable[[], Any], timeout: Optional[float],
                 most: int = MOST_LINKS) -> None:
        self._make = make
        self._timeout = timeout
        self._free: List[Any] = []
        #: Connections open (free or in use), at most ``most``; the calls waiting
        #: for one to come free, in turn.
        self._open = 0
        self._most = most
        self._waiting: Deque["asyncio.Future[Any]"] = deque()
        #: When each round trip in flight times out, by its connection's writer, and
        #: the one timer that aborts those past theirs (a timer a round trip cost more).
        self._deadlines: Dict[Any, float] = {}
        self._guard: Optional[asyncio.TimerHandle] = None
        #: The writers whose round trip the guard aborted, for their error to say why
        self._expired: Set[Any] = set()
        #: hiredis 3's type of a RESP3 push message, which answers no command (none
        #: should come: the loop's connections speak RESP2, ``link_for``)
        self._push: Any = ()
        try:
            import hiredis
        except ImportError:  # redis-py's own parser (its read_response) instead
            self._reader_class: Optional[Callable[[], Any]] = None
        else:
            self._reader_class = lambda: hiredis.Reader(replyError=ResponseError)
            self._push = getattr(hiredis, "PushNotification", ())

    async def exchange(self, packed: bytes) -> Any:
        """Write ``packed`` (one command) and read its reply; a cancel of the caller's
        task meanwhile does not cut the round trip short (the command may have run):
        it is carried on once the reply came, as ``Cancelled``. Anything failing
        closes the connection (a reply left unread must not answer the next command).
        """
        link = self._free.pop() if self._free else await self._take()
        while _ended(link):  # closed by Redis while idle (CLIENT KILL, its `timeout`)
            await self._drop(link)  # nothing sent on it yet: another one serves
            link = self._free.pop() if self._free else await self._take()
        writer, replies = link[1], link[3]
        if self._timeout is not None:
            self._watch(writer, self._timeout)
        cancelled = False
        try:
            if replies is not None:  # hiredis: its bytes parsed as they come (``Replies``)
                replies.transport.write(packed)
                parser = replies.parser
                reply = parser.gets()
                while reply is False or isinstance(reply, self._push):
                    if reply is False and replies.lost is not None:
                        raise replies.lost
                    if reply is False:
                        replies.waiter = waiter = replies.loop.create_future()
                        try:
                            await waiter
                        except asyncio.CancelledError:
                            cancelled = True  # the reply still comes: read on
                    reply = parser.gets()
            else:
                writer.write(packed)
                read = self._reading(link)
                while True:
                    try:
                        reply = await asyncio.shield(read)
                        break
                    except asyncio.CancelledError:
                        if read.cancelled():
                            raise  # (the loop closing cancelled every task, this one too)
                        cancelled = True  # the reply still comes: read on
        except BaseException as exc:
            writer.transport.abort()  # (a read still on ends: its connection closed)
            await self._drop(link)
            failure = exc
            if writer in self._expired and isinstance(exc, Exception):  # the guard's abort
                failure = TimeoutError(f"no reply from Redis within {self._timeout} s (the "
                                       f"broker client's socket_timeout)")
            self._expired.discard(writer)
            setattr(failure, WRITTEN, True)
            if cancelled:
                raise Cancelled(None, failure) from exc
            if failure is not exc:
                raise failure from exc
            raise
        finally:
            if self._timeout is not None:
                self._deadlines.pop(writer, None)
        self._give(link)  # a whole reply read, an error too: the connection is in step
        error = reply if isinstance(reply, Exception) else None
        if cancelled:
            raise Cancelled(None if error else reply, error)
        if error is not None:
            raise error
        return reply

    def _watch(self, writer: Any, timeout: float) -> None:
        """Abort ``writer``'s connection once its round trip has run ``timeout`` s."""
        loop = asyncio.get_running_loop()
        deadline = self._deadlines[writer] = loop.time() + timeout
        if self._guard is None:
            self._guard = loop.call_at(deadline, self._check, loop)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        """The guard's timer: abort the round trips past their deadline, and wait for
        the next deadline of those still in flight (none: the timer ends)."""
        self._guard = None
        now = loop.time()
        for writer, deadline in list(self._deadlines.items()):
            if deadline <= now:
                del self._deadlines[writer]
                self._expired.add(writer)
                writer.transport.abort()
        if self._deadlines:
            self._guard = loop.call_at(min(self._deadlines.values()), self._check, loop)

    async def _take(self) -> Any:
        """A new connection, or once ``most`` are open, the next to come free (or the
        room one closed leaves, to open another)."""
        while True:
            if self._free:
                return self._free.pop()
            if self._open < self._most:
                self._open += 1
                try:
                    return await self._connect()
                except BaseException:
                    self._lost()
                    raise
            waiter: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                link = await waiter
            except asyncio.CancelledError:  # handed one as the cancel came: not lost
                if waiter.done() and not waiter.cancelled() and waiter.result() is not None:
                    self._give(waiter.result())
                elif waiter.done() and not waiter.cancelled():
                    self._lost(closed=False)  # the room it was given goes to the next
                raise
            if link is not None:
                return link

    def _give(self, link: Any) -> None:
        """A connection free again: to the first call still waiting, else kept."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():  # (one cancelled meanwhile is passed over)
                waiter.set_result(link)
                return
        self._free.append(link)

    def _lost(self, closed: bool = True) -> None:
        """A connection closed (or the room it left passed on): the first call still
        waiting opens one of its own."""
        if closed:
            self._open -= 1
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _drop(self, link: Any) -> None:
        self._lost()
        try:
            await link[0].disconnect(nowait=True)
        except Exception as exc:  # closed already: nothing to keep
            logger.debug("could not close a connection of the asyncio pool: %s", exc)

    def _reading(self, link: Any) -> "asyncio.Task[Any]":
        """Without hiredis, the read of the reply to come on ``link``, as an asyncio
        task of its own, which a cancel of the round trip never reaches: redis-py's
        ``read_response`` closes its connection on any exception thrown into it, a
        cancel too, and the reply of a command that ran was lost. (With hiredis the
        replies are parsed as their bytes come, ``Replies``: a cancel loses none.)
        Made directly, not by the loop's task factory (``runner.spawn`` says why)."""
        read = asyncio.Task(self._read(link[0]), loop=asyncio.get_running_loop())
        read.add_done_callback(_seen)
        return read

    @staticmethod
    async def _read(connection: Any) -> Any:
        try:
            return await connection.read_response()
        except ResponseError as exc:  # an error reply, read whole: returned, as hiredis does
            return exc

    async def _connect(self) -> Any:
        connection = self._make()
        await asyncio.wait_for(connection.connect(), self._timeout)
        stream, writer = getattr(connection, "_reader", None), getattr(connection, "_writer", None)
        if writer is None:
            await connection.disconnect()
            raise ConnectionError("this redis-py's asyncio connection has no stream writer")
        replies = None
        if self._reader_class is not None and stream is not None:
            # redis-py has read the replies of its handshake: nothing waits in ``stream``
            replies = Replies(self._reader_class(), writer.transport,
                              asyncio.get_running_loop())
            writer.transport.set_protocol(replies)
            writer.transport.resume_reading()  # (were it paused, no bytes would come)
        return connection, writer, stream, replies

    async def close(self) -> None:
        """Close the connections not in use (on the loop, before it stops)."""
        free, self._free = self._free, []
        for link in free:
            await self._drop(link)


class Replies(asyncio.Protocol):
    """The replies of one of the loop's connections, parsed by hiredis as their bytes
    come (in place of the stream redis-py's connect made): no buffer copied, no read
    coroutine nor waiter of the stream's own a round trip. ``waiter``, set by the
    round trip that waits for a reply, is woken by any bytes that came, or the
    connection's end (``lost``); a cancelled round trip's reply stays in the parser."""

    def __init__(self, parser: Any, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.parser = parser
        self.transport = transport
        self.loop = loop
        self.waiter: "Optional[asyncio.Future[None]]" = None
        #: Why the connection ended (None: open).
        self.lost: Optional[BaseException] = None

    def data_received(self, data: bytes) -> None:
        self.parser.feed(data)
        self._wake()

    def eof_received(self) -> None:  # (the transport then closes: connection_lost)
        self.lost = ConnectionError("Redis closed the connection")

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        if self.lost is None:
            self.lost = exc if exc is not None else ConnectionError(
                "the connection to Redis was closed")
        self._wake()

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _no_script(exc: BaseException) -> bool:
    """Whether Redis did not have the script: hiredis gives the error reply whole,
    redis-py's parser a ``NoScriptError`` with its "NOSCRIPT" prefix cut off."""
    return isinstance(exc, NoScriptError) or str(exc).startswith("NOSCRIPT")


def _ended(link: Any) -> bool:
    """Whether a free connection was closed meanwhile: hiredis's ``Replies`` saw it
    end, or (redis-py's parser) its stream read to its end or its transport closed."""
    replies = link[3]
    if replies is not None:
        return replies.lost is not None
    return link[1].transport.is_closing() or (link[2] is not None and link[2].at_eof())


def _seen(read: "asyncio.Task[Any]") -> None:
    """Mark a read's failure as seen: one whose round trip ended on something else
    meanwhile (its connection closed under it) is not for asyncio to log."""
    if not read.cancelled():
        read.exception()


class Cancelled(Exception):
    """The caller's task was cancelled while its round trip ran on to its reply."""

    def __init__(self, reply: Any, error: Optional[BaseException] = None) -> None:
        super().__init__("cancelled during a round trip")
        self.reply = reply
        #: What the round trip met after the cancel, if it failed (``reply`` is None).
        self.error = error


def link_for(host: Host) -> Optional[LoopLink]:
    """A ``LoopLink`` mirroring the broker client's connections; None for a client
    minitask cannot mirror (a cluster, Sentinel, a custom one)."""
    try:
        mirrored = twin_of(host.broker.transport.client)
    except Unmirrored as exc:  # the recording threads, on the client as it was set
        logger.warning("the asyncio pool records every outcome on its threads: this "
                       "redis-py's asyncio connections have no %s, which the broker "
                       "client sets", ", ".join(exc.settings))
        return None
    if mirrored is None:
        return None
    twin, kwargs = mirrored
    options = in_resp2(twin, kwargs)
    return LoopLink(lambda: twin(**options), options.get("socket_timeout"))


class LoopAcks:
    """Records a plain success's outcome and leases its slot's next task from the loop."""

    def __init__(self, host: Host, recorder: Recorder, holdings: Holdings,
                 queues: QueueSource, ticks: TickSource, broadcasts: BroadcastSource,
                 progress: ProgressWriter, stop: threading.Event) -> None:
        self._host = host
        self._recorder = recorder
        self._holdings = holdings
        self._queues = queues
        self._leases = queues.leases
        self._ticks = ticks
        self._broadcasts = broadcasts
        self._progress = progress
        self._stop = stop
        transport = host.broker.transport
        #: None: never from the loop (replicas confirm writes, more queues, a cluster)
        self.link = (link_for(host) if transport.durability.mode is None
                     and len(queues.queues) == 1 and transport.connections.pool is not None
                     else None)
        self._resting_until = 0.0

    def takes(self, message: Message) -> bool:
        """Whether this success's outcome may be recorded from the loop."""
        hooks = self._host.hooks
        return (self.link is not None and message.workflow is None
                and not self._progress.reported
                and not (hooks.added and hooks.wants("task_success"))
                and not self._queues.refusals and not self._broadcasts.lanes
                and (not self._resting_until or self._rested()))

    def _rested(self) -> bool:
        if time.monotonic() < self._resting_until:
            return False
        self._resting_until = 0.0
        return True

    def next_job(self) -> Optional[Job]:
        """The slot's next job from the buffer, when nothing else is due (None: a
        recording thread asks the worker, ``Answer.how`` "next")."""
        if self._stop.is_set() or not self._ticks.hands_on():
            return None
        return self._holdings.next_buffered(self._stop)

    async def record(self) -> Answer:
        """Record the outcomes put aside and lease the slot's next task, in one round
        trip from the loop; what the slot does next."""
        if time.monotonic() > self._leases.renew_by:  # (Redis was away) a recording thread
            return Answer("flush")  # writes them, and renews the leases before it fetches
        acks = self._holdings.take_acks()
        if not acks:  # a recording thread took them (it records them): a fetch of its own
            return Answer("next")
        results, queues = self._host.broker.results, self._queues
        jobs: List[Job] = []
        for job, _ in acks:  # a loop, not a comprehension: no function made (3.11)
            jobs.append(job)
        call = results.ack_fetch_call([ack for _, ack in acks], queues.behind_acks_call())
        if call is None:
            self._holdings.restore_acks(acks)
            return Answer("flush")
        what = results.ack_then_what(call[1])
        cancelled = False
        sent = time.monotonic()
        try:
            try:
                reply = await self.link.exchange(  # type: ignore[union-attr]
                    self._host.broker.transport.pack_call(call))
            except Cancelled as ended:  # the attempt's task was cancelled meanwhile
                reply, cancelled = ended.reply, True
                if ended.error is not None:
                    raise ended.error
        except (Exception, asyncio.CancelledError) as exc:  # an outage, a script not
            # loaded, a refusal, a cancel as it connected: the recording threads' to ride
            if isinstance(exc, BrokerError):
                note_refused(jobs, exc)
            elif getattr(exc, WRITTEN, False):  # the threads' write may find no lease
                note_unanswered(jobs)
            self._holdings.restore_acks(acks)
            if not _no_script(exc):  # (else loaded as the threads send it: no rest)
                self._resting_until = time.monotonic() + REST
            logger.debug("the asyncio pool's loop could not %s (%s): its recording "
                         "threads do", what, exc)
            return Answer("flush", cancelled=cancelled or isinstance(
                exc, asyncio.CancelledError))
        held, fetched = results.ack_fetch_reply(reply, len(acks), what)
        self._holdings.settle(jobs)
        for (job, _), still_held in zip(acks, held):
            recorded(job, still_held, self._holdings, self._host)
        return self._next(fetched, sent, cancelled)

    def take(self, result: FetchResult) -> None:
        """In a recording thread: hold what the loop's fetch leased when holding it
        needs Redis calls (tasks expired or poisoned), or gives it back (closing);
        the first is that thread's next job (``Worker.follow_on``)."""
        self._queues.take(self._queues.queues[0], result, claim=True)

    def _next(self, fetched: Any, sent: float, cancelled: bool) -> Answer:
        """What the slot runs next, from the fetch's reply (as ``ack_and_fetch`` and
        ``take_fetched`` read it)."""
        queues = self._queues
        if isinstance(fetched, BrokerError) and not queues.refusals.refusal(fetched):
            return Answer("next", cancelled=cancelled)  # an outage: a fetch of its own meets it
        try:
            result = queues.fetched_behind(fetched, sent) or NOTHING
        except BrokerError:
            return Answer("next", cancelled=cancelled)
        if result.expired or result.poisoned:  # Redis calls of their own: off the loop
            return Answer("take", result=result, cancelled=cancelled)
        if not result.deliveries:
            return Answer("run", cancelled=cancelled)  # the dispatcher looks, and waits
        queue = queues.queues[0]
        jobs: List[Job] = []
        for delivery in result.deliveries:
            jobs.append(Job(queue, delivery))
        if self._stop.is_set() or not self._ticks.hands_on():
            if not self._holdings.hold(queue, jobs):
                return Answer("take", result=result, cancelled=cancelled)  # given back there
            return Answer("next", cancelled=cancelled)
        held, first = self._holdings.hold_first(queue, jobs)
        if not held:  # closing: given back by a recording thread
            return Answer("take", result=result, cancelled=cancelled)
        # (made as a tuple: a NamedTuple's keywords cost a call of Python every task)
        return tuple.__new__(Answer, ("run", first, NOTHING, cancelled))
