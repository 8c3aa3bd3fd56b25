"""Durability: a write confirmed by replicas (WAIT) or their disks (WAITAOF).

Redis replicates asynchronously, so a failover can lose a primary's last
writes. With a durability setting the transport sends, in the same write as
a batch of script calls, a touch of one key in the batch's slot and then WAIT
(or WAITAOF), and reads their replies with the scripts' own: one round trip.

Why the touch: WAIT waits for the offset of the connection's own last write.
A script that wrote nothing (an enqueue whose task id is already there) leaves
that offset behind the data it found, written perhaps by another connection
just before, so WAIT would confirm nothing about it. A write on the same
connection after the script is replicated after everything the script saw:
once a replica has the touch, it has that data too.
"""
from __future__ import annotations

import enum
import inspect
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, replace
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import redis

from ..errors import BrokerError, ConfigurationError, DurabilityError, retold
from .keys import confirm_key
from .refusals import broker_reason

#: The durability settings, ``None`` first: the primary's word alone.
MODES = (None, "replicated", "fsync")
#: The most replicas ``min_replicas`` may ask to confirm a write: Redis's default
#: ``maxclients`` (each replica is a client of its primary). More can never confirm on a
#: Redis as it ships, and 10**30 was taken: every send wrote, then failed its WAIT.
#: Fewer replicas connected than asked is said by the worker at start and by status.
MAX_MIN_REPLICAS = 10_000
#: The scripts whose writes must survive a failover when the app asks for it: the
#: enqueue, a worker's outcomes (ack, retry, dead letter), workflow and schedule
#: state, broadcast calls and subscriptions. A lease (fetch) or a cancel lost in a
#: failover only means a task runs again.
CONFIRMED_SCRIPTS = frozenset({"enqueue", "enqueue_now", "enqueue_flow", "ack", "ack_fetch",
                               "retry", "bury", "revive", "spawn", "spawn_flow", "spawn_group",
                               "group_create", "group_join", "enqueue_group",
                               "schedule_fire", "schedule_save", "schedule_remove",
                               "broadcast_send", "broadcast_subscribe", "broadcast_unsubscribe"})

#: The ``keep_unconfirmed`` block open here, if any (what it keeps): a context
#: variable, so that it is this thread's and, on an event loop, this asyncio task's
#: alone (a block held across an ``await`` must not swallow another coroutine's
#: DurabilityError).
_KEPT: ContextVar[Optional["Kept"]] = ContextVar("minitask_kept_unconfirmed", default=None)

#: Asks whether the server has WAITAOF (Redis 7.2+): nil when it does not.
WAITAOF_PROBE = ("COMMAND", "INFO", "WAITAOF")


class AppSetting(enum.Enum):
    """The default of a per-call ``durability``: whatever the app says."""

    APP = "app"


#: What ``apply_async(durability=...)`` means when left out.
APP = AppSetting.APP
#: A per-call durability: a mode, None, or APP.
CallSetting = Union[str, None, AppSetting]


def check_mode(mode: Any, where: str) -> Optional[str]:
    """Refuse a durability that is not None, "replicated" or "fsync"."""
    if mode is not None and (not isinstance(mode, str) or mode not in MODES):
        raise ConfigurationError(f"{where}: durability must be None, 'replicated' or 'fsync', "
                                 f"got {mode!r}")
    return mode


@dataclass(frozen=True)
class Durability:
    """How a write is confirmed: ``mode`` None (the primary alone), "replicated"
    (WAIT) or "fsync" (WAITAOF), by ``min_replicas`` within ``timeout`` seconds."""

    mode: Optional[str] = None
    min_replicas: int = 1
    timeout: float = 1.0
    #: Whether the app chose the timeout: then it is checked against the socket
    #: timeout as the app connects even with no mode, which one call may ask for.
    chosen: bool = False

    @classmethod
    def build(cls, mode: Any, min_replicas: Any, timeout: Any, where: str) -> "Durability":
        """Checked settings; a ConfigurationError (a ValueError) names the bad option.
        A ``timeout`` of None is the default, 1 s."""
        check_mode(mode, where)
        chosen, timeout = timeout is not None, 1.0 if timeout is None else timeout
        if isinstance(min_replicas, bool) or not isinstance(min_replicas, int) \
                or not 1 <= min_replicas <= MAX_MIN_REPLICAS:
            raise ConfigurationError(f"{where}: min_replicas must be an int from 1 to "
                                     f"{MAX_MIN_REPLICAS:,} (replicas that must confirm each "
                                     f"write), got {min_replicas!r:.40}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
                or not timeout > 0 or timeout == float("inf"):
            raise ConfigurationError(f"{where}: durability_timeout must be a number of seconds "
                                     f"> 0 (WAIT 0 would block for ever), got {timeout!r}")
        return cls(mode, min_replicas, float(timeout), chosen)

    def for_call(self, setting: CallSetting, where: str) -> "Durability":
        """These settings with the mode of one call (APP: unchanged)."""
        if setting is APP:
            return self
        return replace(self, mode=check_mode(setting, where))

    @property
    def timeout_ms(self) -> int:
        return max(1, round(self.timeout * 1000))

    def commands(self, slot_key: str) -> List[Tuple[Any, ...]]:
        """The touch and the wait, to send right behind the writes they confirm."""
        touch = ("SET", confirm_key(slot_key), "1")
        if self.mode == "fsync":
            return [touch, ("WAITAOF", 1, self.min_replicas, self.timeout_ms)]
        return [touch, ("WAIT", self.min_replicas, self.timeout_ms)]

    def confirmed(self, reply: Any) -> Tuple[int, bool]:
        """(replicas that confirmed, whether that is enough) from WAIT's or WAITAOF's reply."""
        if self.mode == "fsync":
            local, replicas = int(reply[0]), int(reply[1])
            return replicas, local >= 1 and replicas >= self.min_replicas
        return int(reply), int(reply) >= self.min_replicas

    def check(self, reply: Any, what: str, where: str) -> None:
        """Raise DurabilityError when WAIT's (or WAITAOF's) reply falls short, or was a
        refusal (``refused``: the write was made all the same); inside a
        ``keep_unconfirmed`` block, keep it instead; a DurabilityError (a WAIT
        the socket timeout cut short: ``cut_short``) as it is."""
        if isinstance(reply, BaseException):
            error = reply if isinstance(reply, DurabilityError) else \
                self.refused(reply, what, where)
        else:
            confirmed, enough = self.confirmed(reply)
            if enough:
                return
            error = self.short(reply, confirmed, what, where)
        kept = _KEPT.get()
        if kept is None:
            raise error
        kept.append(error)  # the scripts' replies go back to the caller all the same

    def refused(self, reply: BaseException, what: str, where: str) -> DurabilityError:
        """The error of a touch or WAIT (WAITAOF) Redis refused (an ACL without it, an
        unknown WAITAOF): sent behind the write, they came after it, so the write was
        made, its confirmation not asked: ``sent``, never "could not"."""
        command = "WAITAOF" if self.mode == "fsync" else "WAIT"
        if "unknown command" in str(reply).lower() and "waitaof" in str(reply).lower():
            hint = str(fsync_refused(reply, where))
        else:
            hint = broker_reason(reply)[1] or "allow it to the ACL user"
        return DurabilityError(
            f"Redis at {where} made the write to {what}, then refused the {command} (or the "
            f"touch of a key sent before it) that asks replicas to confirm it "
            f"(durability={self.mode!r}): {reply}; whether replicas have the write could "
            f"not be checked: it runs, yet may not survive a failover; {hint}",
            task_id=None, confirmed=0)

    def short(self, reply: Any, confirmed: int, what: str, where: str) -> DurabilityError:
        """The error of a WAIT (WAITAOF) whose replicas fell short of ``min_replicas``."""
        if self.mode == "fsync" and int(reply[0]) < 1:
            detail = (f"the primary did not fsync its append-only file in time (is appendonly "
                      f"on? with appendfsync everysec it takes up to 1 s) and {confirmed} of "
                      f"{self.min_replicas} replica(s) did")
        else:
            verb = "fsynced" if self.mode == "fsync" else "confirmed"
            detail = f"only {confirmed} of {self.min_replicas} replica(s) {verb} it"
        return DurabilityError(
            f"Redis at {where} did not confirm the write to {what} within "
            f"{self.timeout} s (durability={self.mode!r}): {detail}; it may or may not "
            f"survive a failover", task_id=None, confirmed=confirmed)


class Kept(List[DurabilityError]):
    """What one ``keep_unconfirmed`` block kept: the errors of the writes replicas did
    not confirm in time, in order, and the ids of the tasks they wrote (``writing``).
    No ``__init__`` of its own: a worker opens a block for every outcome it writes."""

    #: The tasks written unconfirmed, as ``writing`` noted them, in order.
    ids: Sequence[str] = ()
    #: Whether the block around this one took these errors (``raise_any`` then
    #: raises nothing: that block's holder says them).
    passed_on = False

    @contextmanager
    def writing(self, ids: Sequence[str]) -> Iterator[None]:
        """Make a write of the tasks ``ids`` in the block: when replicas did not confirm
        it (kept: a WAIT cut short by the socket timeout too; one raised all the same,
        by a path that cannot keep it, is taken here), its ids are noted and the
        caller goes on to its next write."""
        before = len(self)
        try:
            yield
        except DurabilityError as exc:
            self.append(exc)
        self.note(ids, before)

    def note(self, ids: Sequence[str], before: int) -> None:
        """After a write of the tasks ``ids`` made with ``before`` errors kept: its ids
        noted when replicas did not confirm it (an error kept since, or raised and
        appended by the caller)."""
        if len(self) > before:
            self.ids = [*self.ids, *ids]

    def said(self) -> str:
        """What an error that stopped a send adds when writes of it were kept here (made,
        replicas not confirming them): which tasks they carried, and what that means; ""
        when none was (or none of their tasks is left: an ``app.batch()`` block's calls
        refused, the others not written). Their ids go with it as the error's
        ``unconfirmed_ids``: of a write of several calls, those written (or perhaps),
        never those Redis refused."""
        if not self or not self.ids:
            return ""
        ids = self.ids
        return (f"; besides, the write(s) of {len(ids)} task(s) (ids {ids[0]!r} to "
                f"{ids[-1]!r}, the error's unconfirmed_ids) were not confirmed by "
                f"replicas: {self[0]}. Those of the tasks Redis wrote run, yet may not "
                f"survive a failover: after one, check them with app.handle(id).status(), or "
                f"send one again with its task_id=, which never enqueues it twice")

    def told(self, error: BrokerError) -> BrokerError:
        """``error``, of a send that stopped after writes kept here were made, told that
        too (``said``): its ``unconfirmed_ids`` name their tasks; its other fields as
        they were. ``error`` itself when none was kept (or none of their tasks is left)."""
        if not self or not self.ids:
            return error
        return retold(error, f"{error}{self.said()}", unconfirmed_ids=self.ids)

    def raise_any(self) -> None:
        """After the block: one DurabilityError for every write kept (the first's text,
        ``task_ids`` every id noted, the first as ``task_id``), so that a send of
        several writes makes them all, then says each one written unconfirmed."""
        if not self or self.passed_on:
            return
        first = self[0]
        if not self.ids:
            raise first
        raise DurabilityError(str(first), task_id=self.ids[0], confirmed=first.confirmed,
                              task_ids=list(self.ids)) from first


class _Keeping:
    """``keep_unconfirmed``'s block: a class with no ``__init__`` of its own, not a
    generator, as every outcome a worker writes is kept in one (2 Python calls a
    block, against 6 for a ``contextmanager``)."""

    __slots__ = ("outer", "kept", "token")

    def __enter__(self) -> Kept:
        self.outer: Optional[Kept] = _KEPT.get()
        kept = Kept()
        self.kept = kept
        self.token: Token[Optional[Kept]] = _KEPT.set(kept)
        return kept

    def __exit__(self, kind: Optional[type], exc: Optional[BaseException],
                 traceback: Any) -> None:
        _KEPT.reset(self.token)
        outer = self.outer
        if outer is not None and self.kept:
            outer.extend(self.kept)
            outer.ids = [*outer.ids, *self.kept.ids]
            self.kept.passed_on = True


#: Within: a write replicas did not confirm in time raises no DurabilityError here
#: (this thread, or this asyncio task); its error is added to the ``Kept`` the block
#: gives and the scripts' replies go back to their caller, who acts on them: Redis
#: made the write. For a worker's steps, whose replies say what to do next (a group
#: complete: send its body; the leases of a fetch sent behind): thrown away with the
#: error, that work was lost. For a send of several writes (chunks, queues, a
#: cluster's slots): each is made (``Kept.writing``), then one error names every
#: task written unconfirmed (``Kept.raise_any``). A block inside another hands its
#: errors to the outer one, whose holder says them.
keep_unconfirmed = _Keeping


def needs_confirmation(names: Sequence[str]) -> bool:
    """Whether a batch of script calls writes what the app's durability covers."""
    return any(name in CONFIRMED_SCRIPTS for name in names)


def read_confirmation(connection: Any, policy: Optional[Durability]) -> Any:
    """The replies of the touch and WAIT sent behind a batch: WAIT's, or its refusal."""
    if policy is None:
        return None
    try:
        connection.read_response()
    except redis.ResponseError as exc:  # the touch refused (ACL, read-only replica)
        connection.read_response()
        return exc
    try:
        return connection.read_response()
    except redis.ResponseError as exc:
        return exc


def caught_up(client: Any, policy: Durability, slot_keys: Sequence[str]) -> bool:
    """Whether replicas have every write made before this call, as ``policy`` counts
    them (within its timeout): a touch and WAIT (WAITAOF) in the slot of each of
    ``slot_keys`` (one on a single primary). Replication keeps the primary's order,
    so replicas that confirm the touch have every earlier write of it too, from any
    connection or process. False when they fall short or Redis cannot be asked."""
    if policy.mode is None or not slot_keys:
        return False
    cluster = isinstance(client, redis.RedisCluster)
    try:
        for key in slot_keys if cluster else slot_keys[:1]:
            node = client.get_node_from_key(key).redis_connection if cluster else client
            with node.pipeline(transaction=False) as pipe:
                for part in policy.commands(key):
                    pipe.execute_command(*part)
                replies = pipe.execute()
            if not policy.confirmed(replies[-1])[1]:
                return False
    except (redis.RedisError, OSError, AttributeError, IndexError, TypeError, ValueError):
        return False  # not asked: as they were
    return True


def has_waitaof(client: Any) -> bool:
    """Whether the server knows WAITAOF (Redis 7.2 and later); on a cluster, its
    default node. Asked on a raw connection: redis-py's parser of COMMAND INFO
    breaks on the nil an unknown command gets."""
    if isinstance(client, redis.RedisCluster):
        client = client.get_default_node().redis_connection  # type: ignore[no-untyped-call]
    pool = client.connection_pool
    connection = (pool.get_connection("COMMAND") if takes_command_name(pool)
                  else pool.get_connection())
    try:
        connection.send_command(*WAITAOF_PROBE)
        reply = connection.read_response()
    except redis.exceptions.NoPermissionError:
        return True  # not allowed to ask: WAITAOF itself will say
    finally:
        pool.release(connection)
    return waitaof_in(reply)


def takes_command_name(pool: Any) -> bool:
    """Whether this redis-py's ``get_connection`` needs a command name (before 5.3;
    later ones warn when given one)."""
    parameters = list(inspect.signature(pool.get_connection).parameters.values())
    return bool(parameters) and parameters[0].default is inspect.Parameter.empty and \
        parameters[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


def waitaof_in(reply: Any) -> bool:
    """Whether COMMAND INFO WAITAOF's raw reply describes the command (not nil)."""
    if isinstance(reply, dict):
        return any(reply.values())
    return bool(reply and reply[0])


def fsync_refused(exc: Any, where: str) -> ConfigurationError:
    """The clear error for a server without WAITAOF (before Redis 7.2)."""
    return ConfigurationError(
        f"durability='fsync' needs WAITAOF, which Redis at {where} does not have "
        f"(Redis 7.2 or later has it; the server said: {exc}); upgrade Redis or use "
        f"durability='replicated'")


def name_task(error: DurabilityError, task: str, task_id: str,
              count: int = 1, task_ids: Optional[Sequence[str]] = None) -> DurabilityError:
    """``error`` told about the enqueue of a task (the first of ``count`` written
    unconfirmed, ``task_ids`` when they are more than one): which, and how to check on
    it."""
    more = f" (and the {count - 1} other task(s) sent with it)" if count > 1 else ""
    each = (" (each of them: their ids are the error's task_ids, every one sent)"
            if count > 1 else "")
    return DurabilityError(
        f"task {task!r}: the enqueue of id {task_id!r}{more} was not confirmed: {error}. The "
        f"task may or may not be in Redis{each}: check with app.handle({task_id!r}).status() "
        f"(or the handle's status()), or send it again with task_id={task_id!r}, which never "
        f"enqueues it twice", task_id=task_id, confirmed=error.confirmed,
        task_ids=list(task_ids) if task_ids is not None else None)


def name_broadcast(error: DurabilityError, task: str, queue: str,
                   task_ids: Sequence[str]) -> DurabilityError:
    """``error`` told about the send of broadcast calls (``task_ids``, the first to
    ``queue``): which, and how to check on one. ``app.handle(id)`` cannot: it knows
    no broadcast call and reads ``unknown``; the call's own handle can."""
    call_id, count = task_ids[0], len(task_ids)
    more = f" (and the {count - 1} other call(s) sent with it, the error's task_ids)" \
        if count > 1 else ""
    return DurabilityError(
        f"broadcast task {task!r}: the send of call {call_id!r}{more} to queue {queue!r} "
        f"was not confirmed: {error}. The call may or may not be in Redis: check with "
        f"minitask.BroadcastHandle(app.broker, {queue!r}, {call_id!r}).status() or "
        f".subscribers() (app.handle(id) knows no broadcast call: it reads 'unknown'), or "
        f"send it again with task_id={call_id!r}, which never sends a call twice while "
        f"its queue keeps it", task_id=call_id, confirmed=error.confirmed,
        task_ids=list(task_ids))


def name_batch(error: DurabilityError, count: int) -> DurabilityError:
    """``error`` told about the send of an ``app.batch()`` block of ``count`` tasks, every
    call made: which tasks were written unconfirmed (its ``task_ids``), and that the
    block's handles stand, since sending the block again would run them twice."""
    ids = error.task_ids
    first = f", the first {ids[0]!r}" if ids else ""
    return DurabilityError(
        f"app.batch() block of {count} task(s): every call was sent and {len(ids)} task(s) "
        f"(their ids are the error's task_ids{first}) were written to Redis, but the "
        f"write was not confirmed: {error}. They run, yet may not survive a failover: "
        f"sending the block again would run them twice; check each with its handle's "
        f"status() (the block's handles stay valid) or app.handle(id).status(), or send "
        f"one again with its task_id=, which never enqueues it twice",
        task_id=ids[0] if ids else None, confirmed=error.confirmed, task_ids=ids)


def name_workflow(error: DurabilityError, kind: str, handle_id: str) -> DurabilityError:
    """``error`` told about the sending of a workflow (``kind``: "chain", "chord",
    "group") whose handle has id ``handle_id``: it was written whole, only not confirmed,
    so sending it again would run it twice."""
    return DurabilityError(
        f"{kind} {handle_id!r}: it was written to Redis and runs, but the write was not "
        f"confirmed: {error}. Before sending it again, which would run it twice, "
        f"check with `minitask inspect workflow {handle_id}` "
        f"(or app.group_handle({handle_id!r}) for a group; the handle's status() reads "
        f"'unknown' until its step is sent)", task_id=handle_id,
        confirmed=error.confirmed)


@contextmanager
def naming_workflow(kind: str, handle_id: str, step_ids: Sequence[str]) -> Iterator[None]:
    """The error of a workflow's start that Redis may have run told which workflow: a
    DurabilityError (written, unconfirmed: ``name_workflow``), or a lost reply or a
    refusal inside a spawn script (``sent``; ``written``: the registry refused after the
    write): the handle's id, then its steps' ids (``task_ids``), and how to check."""
    try:
        yield
    except DurabilityError as exc:  # written whole: a resend would run it twice
        raise name_workflow(exc, kind, handle_id) from exc
    except BrokerError as exc:
        if not exc.sent:
            raise
        made = "was written to Redis and runs" if exc.written else \
            "may have been written to Redis and run"
        raise retold(
            exc, f"{kind} {handle_id!r}: its start (the {len(step_ids)} step(s) of the error's "
            f"task_ids) {made}: {exc}. Sending it again "
            f"could run it twice: check first with `minitask inspect workflow {handle_id}` "
            f"(or app.group_handle({handle_id!r}) for a group; a step's "
            f"app.handle(id).status(), as app.handle({step_ids[0]!r}).status() for the "
            f"first; 'unknown' until that step is sent)", sent=True, task_ids=step_ids,
            task_id=handle_id) from exc  # (a workflow's: its handle's, as DurabilityError's)


def socket_limit(client: Any) -> Optional[float]:
    """The socket timeout of ``client`` (seconds), or None when it has none or hides it."""
    kwargs: Any = getattr(client, "get_connection_kwargs", dict)()
    limit = kwargs.get("socket_timeout") if isinstance(kwargs, dict) else None
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
        return None
    return float(limit)


def check_socket_timeout(durability: Durability, client: Any, where: str) -> None:
    """Refuse a ``durability_timeout`` the client's socket timeout would cut short: the
    WAIT would end as a broken connection after the write was made, never as the
    DurabilityError it is. Checked when a durability is set, or the timeout was
    chosen (a per-call durability would meet it later, after writing).

    Raises:
        ConfigurationError: naming both timeouts and what to change.
    """
    if durability.mode is None and not durability.chosen:
        return
    limit = socket_limit(client)
    if limit is not None and durability.timeout >= limit:
        raise ConfigurationError(
            f"{where}: durability_timeout of {durability.timeout:g} s is not shorter than the "
            f"Redis socket timeout of {limit:g} s, so every WAIT would end as a broken "
            f"connection; lower durability_timeout, or raise the socket timeout "
            f"(socket_timeout= in the broker URL)")


def cut_short(durability: Durability, what: str, where: str,
              exc: BaseException) -> DurabilityError:
    """The DurabilityError of a WAIT (or WAITAOF) whose reply the socket timeout cut
    off (a client whose timeout could not be read when it was checked), the write's
    own reply read: it was made; Redis is not down, it was waiting."""
    return DurabilityError(
        f"Redis at {where} did not confirm the write to {what} (durability="
        f"{durability.mode!r}, durability_timeout {durability.timeout:g} s): Redis made the "
        f"write, but "
        f"the connection's socket timeout ended the wait for replicas first; it "
        f"is not confirmed on any replica and may or may not survive a failover; keep "
        f"durability_timeout below the socket timeout", task_id=None, confirmed=0)
