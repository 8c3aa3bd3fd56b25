"""Every exception minitask raises, in one tree.

::

    MinitaskError
     +-- ConfigurationError (ValueError)  bad option, priority outside 0..9, no embedded broker
     |    +-- DuplicateTaskError          two tasks registered under one name
     +-- AppNotFound                      -A names nothing, or a module with no/several apps
     +-- ArgumentError (TypeError)        arguments do not bind to the task's signature
     +-- SerializationError
     |    +-- EncodeError (TypeError)     a value msgpack cannot carry; names its path
     |    +-- DecodeError                 corrupt payload or unknown envelope version
     +-- MessageTooLarge (ValueError)     encoded message over max_message_bytes
     +-- ResultTooLarge (ValueError)      encoded result over max_result_bytes (the attempt fails)
     +-- UnknownTaskError                 a message names a task this worker does not know
     +-- BrokerError                      Redis unreachable or failing (chained from redis-py);
     |    |                               broker.refusals.broker_error() words it
     |    +-- DurabilityError             a write not confirmed by replicas in time (WAIT)
     +-- TaskFailed                       get() on a failed task: exc_type, message, traceback
     +-- TimeLimitExceeded                an attempt ran past its timeout
     +-- SoftTimeLimitExceeded            raised inside a task at its soft_timeout
     +-- ResultTimeout (TimeoutError)     get(timeout=...) ran out
     +-- BatchNotSent                     a handle asked about a task app.batch() has not sent
     +-- Retry                            raised inside a task to ask for another attempt
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

from .printable import printable


class MinitaskError(Exception):
    """Base of every minitask error."""


class ConfigurationError(MinitaskError, ValueError):
    """An app or task option is invalid, or the broker cannot be set up."""


class DuplicateTaskError(ConfigurationError):
    """Two different functions were registered under one task name."""


class AppNotFound(MinitaskError):
    """The -A argument names no app, or a module holding zero or several apps."""


class ArgumentError(MinitaskError, TypeError):
    """The arguments of a call do not bind to the task's signature."""

    def __init__(self, message: str, *, task_name: str) -> None:
        super().__init__(message)
        self.task_name = task_name


class SerializationError(MinitaskError):
    """A value could not be turned into bytes or back."""


class EncodeError(SerializationError, TypeError):
    """A value msgpack cannot carry; ``path`` says where it sits."""

    def __init__(self, message: str, *, task_name: str, path: str) -> None:
        super().__init__(message)
        self.task_name = task_name
        self.path = path


class DecodeError(SerializationError):
    """A payload is corrupt or carries an envelope version we do not know."""


class MessageTooLarge(MinitaskError, ValueError):
    """The encoded message is over the app's ``max_message_bytes``."""

    def __init__(self, message: str, *, task_name: str, size: int, limit: int) -> None:
        super().__init__(message)
        self.task_name = task_name
        self.size = size
        self.limit = limit


class ResultTooLarge(MinitaskError, ValueError):
    """A task returned a value whose encoded result is over the app's
    ``max_result_bytes`` (or what the server reads in one value, its
    ``proto-max-bulk-len``, read as the worker starts): that attempt fails with
    this error (retried by the task's ``retry_on``, else dead-lettered); nothing
    of the value is written."""

    def __init__(self, message: str, *, task_name: str, size: int, limit: int) -> None:
        super().__init__(message)
        self.task_name = task_name
        self.size = size
        self.limit = limit


class UnknownTaskError(MinitaskError):
    """A message names a task that this worker has not registered."""


class BrokerError(MinitaskError):
    """Redis is unreachable or answered with an error.

    ``reason`` says which, so that a caller can tell an outage (``unreachable``)
    from a refusal that waiting will not end: ``auth``, ``permission``, ``out of
    memory``, ``read-only``, ``script``, ``wrong type``, ``protocol`` (Redis could
    not read a command, as one over its ``proto-max-bulk-len``) or ``error``; or
    ``pool exhausted``: every connection of the client's pool stayed in use while
    the call waited for one (the client's limit, not the server's).

    ``sent`` is True when the connection failed after the command was written
    whole, before its reply came: Redis may have run it. An enqueue's error then
    says that the task may have been enqueued, and ``task_id`` (the first) and
    ``task_ids`` (every one of the call) name the tasks, to check on them or send
    them again with ``task_id=``, which never enqueues one twice; also when a write
    of several calls (an ``app.batch()`` block, a call and its WAIT) was cut after
    one of them had been written whole, when Redis refused an ``app.batch()`` block
    in part (``enqueued_ids`` the calls it enqueued; ``task_ids`` those and the calls
    refused part way through their script, which may have written them; ``unsent_ids``
    the calls refused before any write, or never sent), and when a command after the
    write was refused (a ``WAIT``, an ACL refusal inside a sending script: then
    ``part_way``: once the ACL allows it, a resend with the same ``task_id=`` queues each
    task the script had not finished once, and never a task twice). False:
    Redis cannot have run it: the write failed before the end of its first call, or
    Redis refused every call before it wrote anything.

    A ``delay_many()`` of several chunks (1,000 tasks each) that stops at a later
    chunk splits its tasks: ``enqueued_ids``, those the chunks ahead enqueued (Redis
    answered: do not send them again), ``task_ids``, every task that may be in Redis
    (those, then the chunk whose reply was lost, if one was: check those with
    ``status()``), and ``unsent_ids``, those never sent (send them again as they are).
    When writes ahead of the failure were made but replicas did not confirm them in
    time (``durability``), ``unconfirmed_ids`` names their tasks, and the message
    says so after the failure: they run, yet may not survive a failover (what a
    DurabilityError would have named had the send gone on; a DurabilityError's own
    are its ``task_ids``).
    """

    #: Of a write of several script calls cut part way (``sent``: an ``app.batch()``
    #: block's), how many of them went whole, in order (those may have run; the rest
    #: never did); None: every one, or a write of one call (a ``delay()``, a workflow's
    #: start: the WAIT behind it is no call of its own).
    sent_calls: Optional[int] = None
    #: Of a ``sent`` error: the write was made for certain (a step after it failed, as
    #: the listing of its queue), so its tasks are enqueued, not "maybe".
    written: bool = False
    #: Of a ``sent`` error: Redis's ACL refused a command part way through a script that
    #: sends tasks, after it may have written: a task it had not finished is left not
    #: pending (at most an id in a queue with no message, which a fetch drops), and once
    #: the ACL allows it a resend with the same ``task_id=`` queues it once, leaving a
    #: task fully queued as it is (a broadcast call: sent again under a new id, as
    #: ``PART_WAY_BROADCAST`` says). minitask checks
    #: the ACL user before a client's first send (on Redis Cluster, before its first to
    #: each node) and refuses it whole, so this is met only on Redis 6.2 (which cannot
    #: be asked) or after the ACL changed since.
    part_way: bool = False
    #: Of an ``app.batch()`` block's error: the store told each call's fate already
    #: (refused in part): passed on as it is, never retold as a lost reply.
    batch_told: bool = False
    #: redis-py's "TTL exhausted." (``redirects_exhausted``): slots moving, it did not run
    moving: bool = False
    #: What a worker was doing when it met the error, when not the step it ran (a
    #: schedule fire ahead of its fetch): its log names this.
    worker_step: Optional[str] = None

    def __init__(self, message: str, *, reason: str = "error", sent: bool = False,
                 task_ids: Optional[Sequence[str]] = None,
                 enqueued_ids: Optional[Sequence[str]] = None,
                 unsent_ids: Optional[Sequence[str]] = None,
                 unconfirmed_ids: Optional[Sequence[str]] = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.sent = sent
        self.task_ids: List[str] = list(task_ids or ())
        self.task_id: Optional[str] = self.task_ids[0] if self.task_ids else None
        #: Of ``task_ids``, those Redis said were enqueued (a call's chunks ahead).
        self.enqueued_ids: List[str] = list(enqueued_ids or ())
        #: Tasks of the call not enqueued: never sent (the chunks after the one that
        #: failed; an ``app.batch()`` block's calls after a cut), or refused (a block's).
        self.unsent_ids: List[str] = list(unsent_ids or ())
        #: Tasks written ahead of the failure whose writes replicas did not confirm.
        self.unconfirmed_ids: List[str] = list(unconfirmed_ids or ())


def retold(error: BrokerError, message: str, **fields: Any) -> BrokerError:
    """A BrokerError saying ``message``, with every attribute of ``error`` (``reason``,
    ``sent``, its id lists, ``task_id``, ``written``, ``sent_calls`` ...) but those
    ``fields`` give (``task_ids`` also sets ``task_id``, its first, unless given)."""
    told = BrokerError(message)
    told.__dict__.update(error.__dict__)
    if "task_ids" in fields and "task_id" not in fields:
        fields["task_id"] = fields["task_ids"][0] if fields["task_ids"] else None
    for name in ("task_ids", "enqueued_ids", "unsent_ids", "unconfirmed_ids"):
        if name in fields:
            fields[name] = list(fields[name])
    told.__dict__.update(fields)
    return told


class DurabilityError(BrokerError):
    """Replicas did not confirm a write in time (``durability``).

    The write may or may not be in Redis, and may or may not survive a
    failover: ``task_id`` names the task (None for a write of no one task; a
    workflow's: the id of its handle), ``task_ids`` every task written unconfirmed
    (``delay_many()``: all of them, in order; one task: its id) and ``confirmed``
    says how many replicas confirmed it. See :doc:`/guide/durability`.
    """

    def __init__(self, message: str, *, task_id: Optional[str], confirmed: int,
                 task_ids: Optional[List[str]] = None) -> None:
        super().__init__(message, reason="unconfirmed", sent=True)
        self.task_id = task_id
        self.confirmed = confirmed
        self.task_ids = list(task_ids) if task_ids is not None else (
            [task_id] if task_id is not None else [])


class TaskFailed(MinitaskError):
    """The task ended in failure; the remote error is described on attributes.

    ``task_id``, ``exc_type``, ``message`` and ``traceback`` hold the remote error as
    it was recorded; the exception's text shows them escaped (``printable``), so that a
    message's newline or escape sequence cannot forge a log line or rewrite a terminal
    where an uncaught one, or a ``logger.exception``, prints it.
    """

    def __init__(self, task_id: str, exc_type: str, message: str, traceback: str) -> None:
        super().__init__(f"task {printable(task_id)} failed: "
                         f"{printable(error_said(exc_type, message))}")
        self.task_id = task_id
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback


def error_said(exc_type: str, message: str) -> str:
    """``Type: message``, as every place says a recorded error (the worker's log, a
    TaskFailed, minitask dead and inspect, the dashboard); one with no message
    (``raise RuntimeError()``) as its type alone, as Python's traceback says it, never
    ``Type: `` nor another text in the message's place."""
    return f"{exc_type}: {message}" if message else exc_type


def task_failed(task_id: str, outcome: Any) -> TaskFailed:
    """The TaskFailed of a task's failed ``outcome`` (``wire.message.Outcome``): its
    error as recorded; one with no error type (a cancel) by its status and reason."""
    if outcome.exc_type:
        return TaskFailed(task_id, outcome.exc_type, outcome.message, outcome.traceback)
    return TaskFailed(task_id, outcome.status.capitalize(), outcome.message or outcome.reason,
                      outcome.traceback)


class TimeLimitExceeded(MinitaskError):
    """An attempt ran longer than its task's ``timeout``."""


class SoftTimeLimitExceeded(MinitaskError):
    """Raised inside a running task when it reaches its ``soft_timeout``.

    The task may catch it to clean up (release a lock, save partial work)
    before its ``timeout``, if it has one, ends the attempt. Not caught, it
    fails the attempt like any other exception: retried when ``retry_on``
    covers it, else dead-lettered. In a coroutine it arrives at an
    ``await`` as a subclass that is also ``asyncio.CancelledError``, so that
    asyncio stops what it started there. How and where it is raised depends
    on the pool; see the guide's "Soft time limits".

    Args:
        message: what happened, naming the task.
        task_name: the task whose attempt reached its soft limit.
        limit: the task's ``soft_timeout``, in seconds.
    """

    def __init__(self, message: str, task_name: Optional[str] = None,
                 limit: Optional[float] = None) -> None:
        super().__init__(message)
        self.task_name = task_name
        self.limit = limit


class ResultTimeout(MinitaskError, TimeoutError):
    """``TaskHandle.get(timeout=...)`` ran out before the task finished."""


class BatchNotSent(MinitaskError):
    """A handle asked about a call its ``app.batch()`` block has not sent.

    Either the block is still open, or it sent nothing: it ended with an
    exception, or the send failed.
    """


class Retry(MinitaskError):
    """Raise inside a task to ask for another attempt.

    Args:
        delay: seconds to wait before the next attempt, a finite number from 0
            to 100 years; ``None`` uses the task's exponential backoff.

    Raises:
        ValueError: a delay that is none of those (nan, inf, negative, text), as
            the task's own error: its attempt fails naming it, instead of a worker
            scheduling the retry for never.
    """

    def __init__(self, delay: float | None = None) -> None:
        if delay is not None and not (
                isinstance(delay, (int, float)) and not isinstance(delay, bool)
                and 0 <= delay <= _MOST_SECONDS):  # (nan compares false: refused too)
            raise ValueError(f"Retry(delay={delay!r}): the delay must be None or a finite "
                             f"number of seconds from 0 to {_MOST_SECONDS} (100 years)")
        super().__init__(f"retry requested (delay={delay!r})")
        self.delay = delay


#: Retry's longest delay: wire.message.MAX_SECONDS (errors imports only printable).
_MOST_SECONDS = 3_155_760_000
