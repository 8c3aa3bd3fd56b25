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
     |    |                               broker_error() words it and says what to do
     |    +-- DurabilityError             a write not confirmed by replicas in time (WAIT)
     +-- TaskFailed                       get() on a failed task: exc_type, message, traceback
     +-- TimeLimitExceeded                an attempt ran past its timeout
     +-- SoftTimeLimitExceeded            raised inside a task at its soft_timeout
     +-- ResultTimeout (TimeoutError)     get(timeout=...) ran out
     +-- BatchNotSent                     a handle asked about a task app.batch() has not sent
     +-- Retry                            raised inside a task to ask for another attempt
"""
from __future__ import annotations

import re
from typing import Any, List, Optional, Sequence, Tuple


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


_ACL_LIST = "the ACL list on the docs' Scaling out page (guide/scaling)"
#: How Redis names the command an ACL refused: "... to run the 'zadd' command".
_REFUSED_COMMAND = re.compile(r"'([\w|]+)' command")
#: The marks of an error raised inside a script: Redis 6.2 wraps it ("Error running
#: script ..."), 7 appends "script: <sha>, on @user_script:<line>."; minitask's own
#: refusals name "minitask key".
_SCRIPT_MARKS = ("Error running script", "user_script", "script: ", "minitask key")
#: Refusals of the whole server, whatever the key: a wait ends them, never a key's fix.
_SERVER_REFUSALS = (
    ("NOREPLICAS", "Redis refuses writes while fewer replicas than min-replicas-to-write "
                   "are connected: bring the replicas back, or lower that setting"),
    ("MISCONF", "Redis refuses writes since it cannot persist (a failed RDB snapshot, "
                "stop-writes-on-bgsave-error): fix its disk or its configuration"),
    ("MASTERDOWN", "this replica lost its link to the primary and serves no stale data: "
                   "bring the primary back, or point minitask at the primary"),
)


def _names(exc: BaseException) -> set[str]:
    """The class names of ``exc`` and its bases: redis-py's errors are told apart
    without importing redis-py here (errors.py imports nothing)."""
    return {cls.__name__ for cls in type(exc).__mro__}


def broker_reason(exc: BaseException, script: Optional[str] = None,
                  commands: Sequence[str] = ()) -> Tuple[str, str]:
    """What kind of failure redis-py's ``exc`` is, and what to do about it.

    Args:
        exc: the error of a call to Redis.
        script: the minitask script the call ran, if it ran one (``fetch``...).
        commands: the commands that script calls: inside a script, Redis does not
            say which one an ACL refused.

    Returns:
        ``(reason, hint)``: ``reason`` as on :class:`BrokerError`; ``hint`` a
        sentence fitting it ("" when there is nothing better to say).
    """
    names, text = _names(exc), str(exc)
    if ({"AuthenticationError", "AuthenticationWrongNumberOfArgsError"} & names
            or "WRONGPASS" in text or "NOAUTH" in text):
        return "auth", ("Redis refused the credentials: check the user name and password "
                        "of the broker URL (percent-encode '@', ':' and '/' in them)")
    if ({"NoPermissionError", "AuthorizationError"} & names or "NOPERM" in text
            or "no permissions" in text.lower() or "can't run this command" in text
            or "can't access" in text):
        command = _REFUSED_COMMAND.search(text)
        if command:
            name = command.group(1)
            missing = f"the ACL user may not run {name.upper()}: add +{name}"
        elif "key" in text.lower():
            missing = "the ACL user may not use minitask's keys: add ~minitask:*"
        elif commands:
            missing = (f"the ACL user may not run one of the commands of minitask's "
                       f"{script}.lua: " + " ".join(f"+{name}" for name in commands))
        else:
            missing = "the ACL user lacks a command minitask sends"
        return "permission", f"{missing}; minitask needs every command of {_ACL_LIST}"
    if "OutOfMemoryError" in names or "OOM command not allowed" in text:
        return "out of memory", (
            "Redis is out of memory (used memory over maxmemory) and refuses writes: raise "
            "maxmemory or free memory; keep maxmemory-policy noeviction, which minitask "
            "needs (a full Redis then refuses writes instead of evicting tasks)")
    if script and "not enough memory" in text:  # Lua's allocator: the server's, no key's
        return "out of memory", (
            "Redis could not give a script's Lua the memory it asked for: check the "
            "server's free memory; no key of minitask's is at fault")
    if "ReadOnlyError" in names or "READONLY" in text:
        return "read-only", (
            "this Redis is a read-only replica, as after a failover: point minitask at the "
            "primary, or use a redis+sentinel:// URL to follow failovers")
    if "Protocol error" in text:
        return "protocol", (
            "Redis refused a command it could not read and closed the connection; a value "
            "longer than the server's proto-max-bulk-len (a managed Redis may set it low) "
            "says \"invalid bulk length\": keep max_message_bytes and max_result_bytes "
            "below it")
    for mark, hint in _SERVER_REFUSALS:  # the whole server's state, in a script or not
        if mark in text:
            return "error", hint
    if "ResponseError" in names and script and any(mark in text for mark in _SCRIPT_MARKS):
        return "script", (
            f"a script error in minitask's {script}.lua: most likely, data that minitask "
            "did not write sits in its keys; inspect the key named, then rename or "
            "delete it")
    if "WRONGTYPE" in text:
        return "wrong type", (
            "a key of minitask holds another type than minitask keeps there (data it did "
            "not write): inspect the queue's keys (minitask:{app:queue}:*), then rename or "
            "delete the one of another type")
    if "MaxConnectionsError" in names or "No connection available" in text:
        # the client's own limit, not the server's: a wait (or a larger pool) ends it
        return "pool exhausted", (
            "every connection of the Redis client's pool is in use (Redis itself is not "
            "at fault): raise the pool's max_connections (?max_connections=N in the broker "
            "URL, 100 by default; ?timeout=S sets how long a call waits for a free one) "
            "and Redis's maxclients to match, or make fewer calls at once")
    if ({"ConnectionError", "TimeoutError", "RedisClusterException", "OSError"} & names):
        return "unreachable", "is Redis running and reachable?"
    return "error", ""


#: What Redis adds to the error of a script, which tells a reader nothing (the hint names
#: minitask's script): 7's " script: <sha>, on @user_script:<line>." and 6.2's
#: "Error running script (call to f_<sha>): @user_script:<line>: " (probe 29h, M1).
_SCRIPT_NOISE = re.compile(r"\s*script: [0-9a-f]{40}, on @user_(?:script|function):\d+\.?"
                           r"|Error running script \(call to f_[0-9a-f]{40}\): "
                           r"@user_(?:script|function):\d+: ")


#: How Redis says that an ACL refused a command a script called, part way through the
#: script (6.2 and 7.0; 7.2 and later): Redis checks the ACL at each command, so what
#: the script wrote before it stands.
_REFUSED_IN_SCRIPT = ("user executing the script", "ACL failure in script")


#: What a send refused part way through its script left, and what mends it: the
#: sending scripts write the message that makes a task's id pending after every write
#: that queues it (issue 29), so a task it had not finished is at most an id in a queue
#: with no message, and a resend by id queues it once.
PART_WAY = ("a task it had not finished is left not pending (at most its id in a queue "
            "with no message, which a fetch drops), one it finished is queued and runs: "
            "once the ACL user may run every command of the list, send it again with the "
            "same task_id= (the error's task_ids), which queues each task it had not "
            "finished once and never a task twice")
#: The same of a workflow's start (its steps: spawn.lua and those built on it), whose
#: error goes on to say how to check the workflow before sending it again.
PART_WAY_WORKFLOW = ("a step it sent runs, one it had not finished is left unsent (at "
                     "most its id in a queue with no message, which a fetch drops)")
#: The scripts of a workflow's start, told ``PART_WAY_WORKFLOW``.
_WORKFLOW_SCRIPTS = frozenset({"spawn", "spawn_flow", "spawn_group", "group_create"})
#: The same of a broadcast call (broadcast_send.lua), whose handle is its own.
PART_WAY_BROADCAST = (
    "a broadcast call written in part may be logged yet reach no subscriber, and sending "
    "it again with its task_id= finds it logged and sends nothing; once the ACL user may "
    "run every command of the list, check the error's task_ids with "
    "minitask.BroadcastHandle(app.broker, queue, id).status() (app.handle(id) knows no "
    "broadcast call): one its subscribers' workers never ran was written in part: send "
    "it again under a new task id")


def refused_in_script(exc: BaseException) -> bool:
    """Whether ``exc`` is a command refused inside a script (an ACL): the script may have
    written before it (``enqueue_now.lua`` writes the message, then trims the wake list)."""
    return any(mark in str(exc) for mark in _REFUSED_IN_SCRIPT)


def _part_way(script: Optional[str]) -> str:
    """What a refusal part way through ``script`` left, and what mends it."""
    if script == "broadcast_send":
        return PART_WAY_BROADCAST
    return PART_WAY_WORKFLOW if script in _WORKFLOW_SCRIPTS else PART_WAY


def without_script_marks(text: str) -> str:
    """Redis's error ``text`` without the script's sha and line it adds."""
    return _SCRIPT_NOISE.sub("", text)


def broker_error(exc: BaseException, what: str, broker: str, *,
                 script: Optional[str] = None, commands: Sequence[str] = (),
                 unreachable: str = "", sent: bool = False) -> BrokerError:
    """The :class:`BrokerError` for redis-py's ``exc``, raised while trying to ``what``.

    Args:
        exc: the error.
        what: a verb phrase ("enqueue into queue 'emails'").
        broker: the broker's description, password already hidden.
        script: the minitask script the call ran, if any, and ``commands``, those
            it calls.
        unreachable: said after the hint when Redis could not be reached.
        sent: the connection failed after the command was written whole, before
            its reply came: Redis may have run it (said so; ``BrokerError.sent``); or
            (``refused_in_script``) Redis refused a command inside a script that
            writes, which may have written before it.
    """
    reason, hint = broker_reason(exc, script, commands)
    if reason == "unreachable" and unreachable:
        hint = f"{hint} {unreachable}"
    if sent and refused_in_script(exc):
        message = (f"Redis refused a command part way through the script to {what} (broker "
                   f"{broker}): {without_script_marks(str(exc))}: what the script wrote "
                   f"before that command stands, so its write may have been made, in part "
                   f"or whole: "
                   f"{_part_way(script)}")
    elif sent:
        message = (f"lost the reply to {what} (broker {broker}): "
                   f"{without_script_marks(str(exc))}: the connection failed after the "
                   f"command was written, so Redis may have run it")
    else:
        message = f"could not {what} (broker {broker}): {without_script_marks(str(exc))}"
    error = BrokerError(f"{message}; {hint}" if hint else message, reason=reason, sent=sent)
    error.part_way = sent and refused_in_script(exc)
    return error


class TaskFailed(MinitaskError):
    """The task ended in failure; the remote error is described on attributes."""

    def __init__(self, task_id: str, exc_type: str, message: str, traceback: str) -> None:
        super().__init__(f"task {task_id} failed: {exc_type}: {message}")
        self.task_id = task_id
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback


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


#: Retry's longest delay: wire.message.MAX_SECONDS (errors imports nothing of minitask's).
_MOST_SECONDS = 3_155_760_000
