"""Sender: checks, encodes and writes enqueued calls; below the app and its tasks.

A task enqueues through the sender its app hands it, so tasks never reach
back up into the app for the broker.
"""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .batching import DISCARDED, FAILED, SENT, Batch, PendingHandle, open_batch
from .broker.durability import (APP, CallSetting, Durability, Kept, check_socket_timeout,
                                keep_unconfirmed, name_batch, name_task)
from .broker.keys import check_name
from .errors import (BrokerError, ConfigurationError, DurabilityError, MessageTooLarge,
                     retold)
from .handle import TaskHandle
from .stores.aio import AsyncBroker
from .stores.broker import Broker
from .wire.message import Clock, Message
from .wire.serializer import check_arguments, encode_message
from .wire.types import TypeRegistry

#: One checked, encoded message: (id, body, priority, due ms or 0).
Entry = Tuple[str, bytes, int, int]
#: Messages per enqueue script call in bulk: keeps each script short so Redis stays responsive.
BULK_CHUNK = 1000


@contextmanager
def _naming(messages: Sequence[Message]) -> Iterator[None]:
    """A DurabilityError told which tasks' enqueues replicas did not confirm (its
    ``task_ids``, a ``Kept``'s: the first named, every one carried)."""
    try:
        yield
    except DurabilityError as exc:
        ids = exc.task_ids or [messages[0].id]
        task = next((m.task for m in messages if m.id == ids[0]), "?")
        raise name_task(exc, task, ids[0], len(ids), ids) from exc


class _Chunks:
    """The chunks of one send (each queue's entries, ``BULK_CHUNK`` at a time, in order),
    iterated inside its ``keep_unconfirmed`` block, and what a chunk's failure says:
    classified once (refused, its reply lost, written unconfirmed), the error's id
    lists built in one place (``error``). A class, not three context managers a chunk:
    each re-wrapped the last one's error, and none said the writes kept unconfirmed."""

    __slots__ = ("messages", "by_queue", "every", "kept", "before", "mark")

    def __init__(self, messages: Sequence[Message], by_queue: Dict[str, List[Entry]],
                 kept: Kept) -> None:
        self.messages, self.by_queue, self.kept = messages, by_queue, kept
        #: Every task of the call, in the order sent; ``before`` of them in chunks done.
        self.every = [entry[0] for entries in by_queue.values() for entry in entries]
        self.before = 0
        #: The errors kept before the chunk in hand was written.
        self.mark = 0

    def __iter__(self) -> Iterator[Tuple[str, List[Entry]]]:
        """(queue, chunk) to write, each noted once written (unconfirmed: kept)."""
        kept = self.kept
        for queue, entries in self.by_queue.items():
            for start in range(0, len(entries), BULK_CHUNK):
                chunk = entries[start:start + BULK_CHUNK]
                self.mark = len(kept)
                yield queue, chunk
                kept.note([entry[0] for entry in chunk], self.mark)
                self.before += len(chunk)

    def failed(self, exc: BrokerError, queue: str, chunk: Sequence[Entry]) -> None:
        """A chunk's write failed with ``exc``: written unconfirmed (DurabilityError), kept
        and the next chunk goes on; else raised, as ``error`` tells it."""
        if isinstance(exc, DurabilityError):  # (raised though kept: an async pipeline's cut)
            self.kept.append(exc)
            return
        error = self.error(exc, queue, [entry[0] for entry in chunk])
        if error is exc:
            raise exc
        raise error from exc

    def error(self, exc: BrokerError, queue: str, ids: List[str]) -> BrokerError:
        """``exc`` of the chunk of tasks ``ids`` (into ``queue``) told what the call's
        tasks are: a lost reply (``sent``): those of the chunks ahead enqueued, the
        chunk's maybe, the rest never sent; a refusal after chunks were enqueued: those
        enqueued, the rest not; a refusal of the first: ``exc`` as it is. Writes kept
        unconfirmed ahead of it are said too (``unconfirmed_ids``)."""
        before, every, task = self.before, self.every, self.messages[0].task
        done = every[:before]
        if exc.sent:  # (written unconfirmed, then its registry refused: noted too)
            self.kept.note(ids, self.mark)
            maybe, rest = ids, every[before + len(ids):]
            text = _lost_text(exc, task, queue, ids, done, rest)
            if exc.written:  # written for certain (its queue's listing failed after)
                done, maybe = done + ids, []
        elif before:
            maybe, rest = [], every[before:]
            text = (f"task {task!r}: partly enqueued: the first {before} of the call's "
                    f"{len(every)} task(s) were enqueued (ids {done[0]!r} to {done[-1]!r}, "
                    f"the error's task_ids: do not send them again), the {len(rest)} from "
                    f"id {rest[0]!r} on were not (the error's unsent_ids): {exc}. Send "
                    f"again only the calls not enqueued")
        else:  # nothing of the call written (nor kept: no chunk came before)
            task = next((m.task for m in self.messages if m.id == ids[0]), task)
            return not_enqueued(exc, task, queue, len(ids))
        return retold(exc, text + self.kept.said(), sent=True, task_ids=done + maybe,
                      enqueued_ids=done, unsent_ids=rest, unconfirmed_ids=self.kept.ids)


def not_enqueued(error: BrokerError, task: str, queue: str, count: int) -> BrokerError:
    """``error`` (nothing written) naming the task it did not enqueue, as well as the
    queue: "could not enqueue task 'shop.add' into queue 'default' ...", the first of
    ``count`` such tasks named."""
    more = f" (and {count - 1} other task(s) of the call)" if count > 1 else ""
    text, plain = str(error), f"enqueue into queue {queue!r}"
    named = f"enqueue task {task!r}{more} into queue {queue!r}"
    return retold(error, text.replace(plain, named, 1) if plain in text
                  else f"task {task!r}{more}: {text}")


def lost_reply(error: BrokerError, task: str, queue: str, task_id: str) -> BrokerError:
    """``error`` (``sent``) told about the enqueue of task ``task_id`` (a plain ``delay()``);
    ``written`` (its queue's listing failed after it): ``enqueued_ids`` names it."""
    return retold(error, _lost_text(error, task, queue, [task_id], [], []), sent=True,
                  task_ids=[task_id], enqueued_ids=[task_id] if error.written else [])


def _lost_text(error: BrokerError, task: str, queue: str, ids: Sequence[str],
               done: Sequence[str], rest: Sequence[str]) -> str:
    """What ``error`` (``sent``) says of the enqueue of tasks ``ids``, the first named:
    ``done`` the call's tasks ahead of them, enqueued; ``rest``, after them, never sent
    (a call sent in chunks)."""
    first, count = ids[0], len(ids)
    more = (f" (and the {count - 1} other task(s) written with it)" if count > 1 else "")
    if error.written:  # certain: only what followed the write failed
        return (f"task {task!r}: the enqueue of id {first!r}{more} into queue {queue!r} was "
                f"made (the error's enqueued_ids: do not send them again), then: {error}"
                f"{_split(done, rest)}")
    split = _split(done, rest)
    said = (f"task {task!r}: the enqueue of id {first!r}{more} into queue {queue!r} may have "
            f"been made: {error}{split}. The task(s) that may be in Redis (the error's "
            f"task_ids) may run: sending them again as they were could run them twice")
    if error.part_way:  # refused part way: a task not finished is left not pending
        return (f"{said}; once the ACL allows the command refused, send again with "
                f"task_id={first!r}, which queues it once if the refusal left it "
                f"unfinished and never enqueues it twice")
    return (f"{said}; check with app.handle({first!r}).status(), or send again with "
            f"task_id={first!r}, which never enqueues it twice")


def broadcast_failed(error: BrokerError, task: str, queue: str, ids: List[str],
                     done: List[str], rest: List[str], kept: Kept) -> BrokerError:
    """``error`` of the send of broadcast calls ``ids`` to ``queue`` told what Redis
    holds: those of the queues sent before (``done``) written, ``ids`` perhaps (a lost
    reply, a refusal part way through broadcast_send: ``sent``), ``rest`` never sent;
    ``error`` itself when nothing was written. A broadcast call is checked on with its
    own handle: ``app.handle(id)`` knows none."""
    if not error.sent and not done:
        return error
    maybe = ids if error.sent else []
    head = (f"broadcast task {task!r}: the send of {len(ids)} call(s) to queue {queue!r} "
            f"(the first {ids[0]!r}) " + ("may have been made" if maybe else "was refused"))
    check = (f"{head}: {error}{_split(done, rest)}. A call that may be in Redis (the "
             f"error's task_ids) may run: check with minitask.BroadcastHandle(app.broker, "
             f"{queue!r}, {ids[0]!r}).status()")
    text = (f"{check}; one written in part never runs, and its task_id= does not mend it: "
            f"send it again under a new id" if error.part_way else  # (its refusal says)
            f"{check}, or send it again with task_id={ids[0]!r}, which never sends a call "
            f"twice while its queue keeps it")
    return retold(error, text + kept.said(), sent=True, task_ids=done + maybe,
                  enqueued_ids=done, unsent_ids=([] if maybe else ids) + rest,
                  unconfirmed_ids=kept.ids)


def _split(done: Sequence[str], rest: Sequence[str]) -> str:
    """What a chunked call's error adds: ``done``, its tasks enqueued ahead of the chunk
    that failed; ``rest``, those after, never sent."""
    split = ""
    if done:
        split += (f"; the {len(done)} task(s) of the same call ahead of it were enqueued "
                  f"(ids {done[0]!r} to {done[-1]!r}, the error's enqueued_ids: do not send "
                  f"them again)")
    if rest:
        split += (f"; the {len(rest)} after it (ids {rest[0]!r} to {rest[-1]!r}, the "
                  f"error's unsent_ids) were never sent: send those again as they are")
    return split


def _lost_batch(error: BrokerError, ids: List[str], size: int) -> BrokerError:
    """``error`` (``sent``) told about the write of an ``app.batch()`` block of ``size``
    calls, of which ``ids`` may have been enqueued (a cut write: the rest never sent,
    ``error``'s ``unsent_ids``); ``written`` (the registry refused after the write):
    were, every one of them (``enqueued_ids``)."""
    first = ids[0]
    unsent = (f"; its {len(error.unsent_ids)} call(s) after the cut (the error's unsent_ids) "
              f"never reached Redis: their handles raise BatchNotSent, send those again as "
              f"they are" if error.unsent_ids else "")
    if error.written:  # certain: only what followed the write failed
        return retold(
            error, f"app.batch() block of {size} task(s): its write was made (its tasks "
            f"are enqueued and run: the error's enqueued_ids; their handles stay valid; "
            f"do not send the block again), then: {error}{unsent}", sent=True, task_ids=ids,
            enqueued_ids=ids, unsent_ids=error.unsent_ids)
    resend = (f", or send one again with its own task_id=, as task_id={first!r}, which "
              f"never enqueues it twice" + (  # (part way: a task not finished, not pending)
                  " (refused part way: once the ACL allows the command refused, which "
                  "queues a task the refusal left unfinished once)" if error.part_way else ""))
    return retold(
        error,
        f"app.batch() block of {size} task(s): its write may have been made: {error}. "
        f"Its tasks that may be in Redis (the error's task_ids) may run: sending the block "
        f"again could run them twice; check each with its handle's status() (their "
        f"handles stay valid) or app.handle(id).status(), as app.handle({first!r})."
        f"status(){resend}{unsent}", sent=True, task_ids=ids,
        enqueued_ids=error.enqueued_ids,  # (a call at a time: those Redis answered for)
        unsent_ids=error.unsent_ids)


def check_queue_name(queue: Any, where: str = "") -> None:
    """Refuse a queue name that is not a str or would break the key layout; the error
    starts with ``where`` (what was given it: ``task 'x'``, ``schedule 'y'``), if any."""
    check_key_part("queue", queue, where)


def check_key_part(kind: str, name: Any, where: str = "") -> None:
    head = f"{where}: " if where else ""
    if not isinstance(name, str):
        raise ConfigurationError(f"{head}{kind} name must be a str, got {name!r}")
    try:
        check_name(kind, name)
    except ValueError as exc:
        raise ConfigurationError(f"{head}{exc}") from None


class Sender:
    """Writes messages to the broker of one app; ``broker`` connects on first use."""

    #: The app's (broadcast_maxlen, broadcast_ttl in ms), for broadcast calls (broadcast.py).
    broadcast_limits: Tuple[int, int] = (10_000, 86_400_000)
    #: The app's durability: how replicas confirm an enqueue (docs: guide/durability).
    durability = Durability()

    def __init__(self, broker: Callable[[], Broker], clock: Clock,
                 max_message_bytes: int,
                 async_broker: Optional[Callable[[], AsyncBroker]] = None) -> None:
        self._broker = broker
        self._async_broker = async_broker
        self.clock = clock
        self.max_message_bytes = max_message_bytes
        #: The app's registered argument types (``app.register_type``).
        self.types = TypeRegistry()

    def send_plain(self, message: Message, result_ttl_ms: int) -> Optional[TaskHandle[Any]]:
        """A plain ``delay()``: written, and its handle; None (nothing sent, ``send``'s
        to send) when it is not one: inside an ``app.batch()`` block, with an app
        durability (replicas confirm it) or flow control.

        Its id was made for this call, so it cannot be pending already: ready at once,
        it goes without a script where the queue store can (``QueueStore.push``); else
        by enqueue.lua. One path, every check of ``send`` kept (``entry``), the batch
        looked up once: every ``delay()`` comes here.
        """
        if (self.durability.mode is not None or message.flow is not None
                or open_batch(self) is not None):
            return None
        entry = self.entry(message)
        broker = self._broker()
        queues = broker.queues
        # (its clock reading, made a moment ago, serves as now)
        try:  # (no context manager: one costs every delay() a dozen Python calls)
            if entry[3] > message.enqueued_at_ms or not queues.push(message.queue, entry):
                queues.enqueue(message.queue, [entry], message.enqueued_at_ms, self.durability)
        except BrokerError as exc:
            if isinstance(exc, DurabilityError):
                raise
            if not exc.sent:
                raise not_enqueued(exc, message.task, message.queue, 1) from exc
            raise lost_reply(exc, message.task, message.queue, message.id) from exc
        return TaskHandle(broker, message.queue, message.id, result_ttl_ms, self._async_broker)

    def send(self, messages: Sequence[Message], durability: CallSetting = APP) -> None:
        """Encode and check every message, then write them, grouped by queue.

        Nothing is sent unless every message passes its checks. ``durability``
        (default: the app's) may ask replicas to confirm each write: when they
        do not, the other chunks are sent all the same, then DurabilityError names the
        first task and carries every id written unconfirmed (``task_ids``). Inside an
        ``app.batch()`` block the messages join the batch instead. (A plain
        ``delay()``: ``send_plain``.)
        """
        policy = self.durability_of(messages, durability)
        by_queue = self.prepare(messages)
        batch = open_batch(self)
        if batch is not None:
            _check_batchable(messages, durability)
            batch.add(by_queue, _specs(messages))
            return
        broker = self._broker()
        now_ms = self.clock.now_ms()
        specs = _specs(messages)  # flow control (limits.py): through the flow enqueue
        with keep_unconfirmed() as kept:  # a chunk written unconfirmed: the others are sent too
            chunks = _Chunks(messages, by_queue, kept)
            for queue, chunk in chunks:
                try:
                    if specs:
                        broker.flow.enqueue(queue, chunk, specs, now_ms, policy)
                    else:
                        broker.queues.enqueue(queue, chunk, now_ms, policy)
                except BrokerError as exc:
                    chunks.failed(exc, queue, chunk)
        with _naming(messages):
            kept.raise_any()

    async def asend(self, messages: Sequence[Message], durability: CallSetting = APP) -> None:
        """``send`` on the running event loop: the same checks, then awaited writes."""
        policy = self.durability_of(messages, durability)
        by_queue = self.prepare(messages)
        batch = open_batch(self)
        if batch is not None:
            _check_batchable(messages, durability)
            batch.add(by_queue, _specs(messages))
            return
        broker = self.async_broker()
        now_ms = self.clock.now_ms()
        specs = _specs(messages)  # flow control (limits.py): through the flow enqueue
        with keep_unconfirmed() as kept:  # as ``send`` (this asyncio task's block alone)
            chunks = _Chunks(messages, by_queue, kept)
            for queue, chunk in chunks:
                try:
                    if specs:
                        await broker.enqueue_flow(queue, chunk, specs, now_ms, policy)
                    else:
                        await broker.enqueue(queue, chunk, now_ms, policy)
                except BrokerError as exc:
                    chunks.failed(exc, queue, chunk)
        with _naming(messages):
            kept.raise_any()

    def durability_of(self, messages: Sequence[Message], durability: CallSetting) -> Durability:
        """The app's durability with a call's own mode; a bad one, or a timeout the
        socket timeout would cut short, is a ConfigurationError, before anything is
        written."""
        where = f"task {messages[0].task!r}" if messages else "send"
        policy = self.durability.for_call(durability, where)
        if durability is not APP and policy.mode is not None and not policy.chosen:
            # an app-wide durability or a chosen timeout was checked as the app connected
            check_socket_timeout(policy, self._broker().transport.client, where)
        return policy

    def async_broker(self) -> AsyncBroker:
        if self._async_broker is None:
            raise ConfigurationError("this sender has no async broker")
        return self._async_broker()

    def prepare(self, messages: Sequence[Message]) -> Dict[str, List[Entry]]:
        """Check and encode every message: (id, body, priority, due ms) entries by queue.

        Raises:
            EncodeError, MessageTooLarge: before anything is sent.
        """
        by_queue: Dict[str, List[Entry]] = {}
        for message in messages:
            by_queue.setdefault(message.queue, []).append(self.entry(message))
        return by_queue

    def entry(self, message: Message) -> Entry:
        """One message checked and encoded: its (id, body, priority, due ms) entry.

        Raises:
            EncodeError, MessageTooLarge: as ``prepare``.
        """
        if self.types:
            args, kwargs = self.types.arguments_to_wire(message.task, message.args,
                                                        message.kwargs)
            message = dataclasses.replace(message, args=args, kwargs=kwargs)
        check_arguments(message.task, message.args, message.kwargs)
        body = encode_message(message)
        if len(body) > self.max_message_bytes:
            raise MessageTooLarge(
                f"task {message.task!r}: message of {len(body)} bytes is over "
                f"max_message_bytes={self.max_message_bytes}; pass a reference (a key or "
                f"a URL) instead of the data", task_name=message.task, size=len(body),
                limit=self.max_message_bytes)
        return (message.id, body, message.priority, message.eta_ms or 0)

    def broker(self) -> Broker:
        """The app's broker, connected on first use (workflows send through it)."""
        return self._broker()

    def handles(self, messages: Sequence[Message], result_ttl_ms: int) -> List[TaskHandle[Any]]:
        """Handles on sent messages (or on messages a batch block holds back)."""
        broker = self._broker()
        batch = open_batch(self)
        if batch is not None:
            return [PendingHandle(batch, broker, m.queue, m.id, result_ttl_ms,
                                  self._async_broker) for m in messages]
        return [TaskHandle(broker, m.queue, m.id, result_ttl_ms, self._async_broker)
                for m in messages]

    @contextmanager
    def batch(self) -> Iterator[Batch]:
        """Hold back what this context sends until the block ends, then send it in one
        write (see ``Minitask.batch``)."""
        outer = open_batch(self)
        batch = Batch(self)
        batch.enter()
        try:
            yield batch
        except BaseException:
            batch.close(DISCARDED)
            raise
        if outer is not None:
            batch.merge_into(outer)
            return
        try:
            # the writes replicas did not confirm come here (the block of enqueue_queues
            # hands them on): said with a refusal or a lost reply after them, as well
            with keep_unconfirmed() as kept:
                if batch.by_queue:
                    self._broker().flow.send_together(batch.by_queue, batch.specs,
                                                      self.clock.now_ms(), BULK_CHUNK)
            kept.raise_any()
        except DurabilityError as exc:  # every call sent, those written stand: handles too
            batch.close(SENT)
            raise name_batch(exc, len(batch)) from exc
        except BrokerError as exc:
            if not exc.sent:
                batch.close(FAILED)
                error = exc
            else:
                # enqueued in part, or its reply lost (written perhaps): the handles say;
                # those of the calls not enqueued (refused, or never sent) raise
                batch.close(SENT, exc.unsent_ids)
                # the store's own (refused in part: each call's fate told) as it is; a
                # lost reply (a cut write: those it names), or a refusal after the write
                error = exc if exc.batch_told else _lost_batch(exc, exc.task_ids or [
                    entry[0] for entries in batch.by_queue.values() for entry in entries],
                    len(batch))
            told = kept.told(error)
            if told is exc:
                raise
            raise told from exc
        except BaseException:
            batch.close(FAILED)
            raise
        batch.close(SENT)

    def refuse_in_batch(self, what: str) -> None:
        """Refuse ``what`` (a workflow's start) inside a batch block: it would be sent at
        once, not with the block."""
        if open_batch(self) is not None:
            raise ConfigurationError(f"cannot {what} inside an app.batch() block: it would "
                                     f"be sent at once, not when the block ends; start it "
                                     f"after the block")


def _specs(messages: Sequence[Message]) -> Dict[str, str]:
    """The flow specs of flow-controlled messages, by id."""
    return {m.id: m.flow for m in messages if m.flow is not None}


def _check_batchable(messages: Sequence[Message], durability: CallSetting) -> None:
    """A batch block is confirmed as the app says: a call with a durability of its own
    is refused there."""
    if durability is not APP and messages:
        raise ConfigurationError(
            f"task {messages[0].task!r}: durability per call cannot be given inside an "
            f"app.batch() block (the block is confirmed as the app's durability says); "
            f"send it after the block")
