"""GroupHandle: a sent group's members, their results, and its record in Redis.

A workflow that ends with a group returns a ``GroupHandle``; ``app.group_handle``
rebuilds one in another process from the record the workflow's first script call
wrote (``describe`` makes that record, ``rebuild`` reads it back).
"""
from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, Union

from .broker.keys import check_name
from .errors import ConfigurationError, DecodeError, ResultTimeout
from .handle import StepHandle, TaskHandle, check_timeout, status_of, wait_result
from .options import check_task_id
from .printable import printable, shown_value
from .ranout import LOOK_GRACE
from .stores.result_pages import PAGE, kept_results
from .wire.message import to_ms

if TYPE_CHECKING:
    from .sending import Sender
    from .stores.aio import AsyncBroker
    from .stores.broker import Broker
    from .stores.results import ResultStore

#: What a workflow's ``delay()`` returns: a task's handle, or a group's.
Handle = Union[TaskHandle[Any], "GroupHandle"]


class GroupHandle:
    """A sent group: its members' handles, in order, and their results.

    Attributes:
        id: the group's id.
    """

    def __init__(self, group_id: str, handles: List[Handle],
                 entries: List[Optional[Tuple[str, str]]],
                 finals: List[Optional[Tuple[str, str]]], sender: Sender) -> None:
        self.id = group_id
        #: One handle per member, in order: a member that is a chain or a chord has
        #: the handle of its last task; a member that is a group, a GroupHandle.
        self.handles = handles
        self._entries = entries
        self._finals = finals
        self._sender = sender

    def __repr__(self) -> str:
        return f"<GroupHandle {self.id} members={len(self.handles)}>"

    def get(self, timeout: Optional[float] = None) -> List[Any]:
        """Wait for every member and return their results, in member order.

        The results are read a page of members at a time, and the timeout is
        checked between pages: a wait on a group of any size ends within
        ``timeout``, give or take a page's read and the counts its message gives.

        Args:
            timeout: seconds to wait at most, for all members together (reading
                their results included).

        Returns:
            The members' results, in member order.

        Raises:
            TaskFailed: a member failed (the first one in member order).
            ResultTimeout: ``timeout`` seconds passed first (a ``TimeoutError``);
                its message counts the members in each status. Also raised at
                once, as ``TaskHandle.get()`` raises it, when a member's task is
                known to be gone (it was sent, and its result expired or was
                forgotten): its message names the group, that task and why.
            BrokerError: Redis could not be reached.
            ConfigurationError: ``timeout`` is not a number of seconds, 0 or more
                (NaN or -1, say).
        """
        check_timeout(timeout, f"get() on group {self.id}")
        deadline = None if timeout is None else time.monotonic() + timeout
        tasks = self._tasks()
        values, unread = self._values(tasks, deadline)
        if len(values) == len(tasks):
            return self._shaped(values)
        ran_out = time.monotonic() if deadline is None else min(deadline, time.monotonic())
        raise ResultTimeout(
            f"group {self.id} did not finish within {timeout} s: "
            f"{self._counts_said(ran_out + LOOK_GRACE, tasks[:len(values)])}"
            + (f"; reading its results took that time (those of {len(values):,} of its "
               f"{len(tasks):,} tasks were read)" if unread else ""))

    def _tasks(self) -> List[TaskHandle[Any]]:
        """The tasks whose results make up get()'s, depth first (those of the groups
        nested in this one in their place): one list, read a page at a time."""
        tasks: List[TaskHandle[Any]] = []
        pending: List[Handle] = list(reversed(self.handles))
        while pending:  # walked without recursion, as status() walks them
            handle = pending.pop()
            if isinstance(handle, GroupHandle):
                pending.extend(reversed(handle.handles))
            else:
                tasks.append(handle)
        return tasks

    def _shaped(self, values: List[Any]) -> List[Any]:
        """``values`` (one per task of ``_tasks()``, in its order) nested as the
        members are: a nested group's results in a list of their own."""
        flat = iter(values)
        shaped: List[Any] = []
        walks = [(iter(self.handles), shaped)]
        while walks:
            members, into = walks[-1]
            handle = next(members, None)
            if handle is None:
                walks.pop()
            elif isinstance(handle, GroupHandle):
                into.append([])
                walks.append((iter(handle.handles), into[-1]))
            else:
                into.append(next(flat))
        return shaped

    def _values(self, tasks: List[TaskHandle[Any]],
                deadline: Optional[float]) -> Tuple[List[Any], bool]:
        """Each task's result, in order: read ``PAGE`` at a time, each task waited for
        only when its result is not there yet; and whether the deadline passed between
        pages (with results left unread) rather than in a wait. Past ``deadline`` no
        page is read but the first (``timeout=0`` looks once at a group done already):
        then the results read by then.

        Raises:
            ResultTimeout: a task is gone (its result expired or was forgotten):
                the message names the group, the task, and why.
        """
        store = self._sender.broker().results
        values: List[Any] = []
        first = True
        while len(values) < len(tasks):
            if not first and deadline is not None and time.monotonic() >= deadline:
                return values, True
            first = False
            page = tasks[len(values):len(values) + PAGE]
            read = self._page_values(store, page, deadline)
            values.extend(read)
            if len(read) < len(page):  # the next result is not there yet: wait for it
                waited = page[len(read)]
                try:
                    body, queue = wait_result(waited, deadline)
                except ResultTimeout as exc:  # unknown here: it will never finish
                    raise ResultTimeout(
                        f"group {self.id} can never finish: its task {len(values) + 1:,} "
                        f"of {len(tasks):,} (in member order) has no result to wait for: "
                        f"{exc}") from exc
                if body is None:
                    return values, False
                values.append(waited._value_of(body, queue))
        return values, False

    def _page_values(self, store: ResultStore, page: List[TaskHandle[Any]],
                     deadline: Optional[float]) -> List[Any]:
        """The results of ``page``'s first tasks, up to the first not there yet."""
        tasks: List[Tuple[str, str]] = []
        for task in page:
            if task._queue is None:  # (never: a member's handle is made with its queue)
                break
            tasks.append((task._queue, task.id))
        bodies = kept_results(store, tasks, deadline, f"read the results of group {self.id}")
        values = []
        for task, (queue, _), body in zip(page, tasks, bodies):
            if body is None:
                break
            values.append(task._value_of(body, queue))
        return values

    def status(self) -> Dict[str, int]:
        """How many members are in each status (``succeeded``, ``running``...).

        A member that is a chain counts as its first task until that succeeded, then
        as its last task (``running`` until that is sent); a member that is a group
        as ``succeeded`` once all of its members are, ``failed`` or ``cancelled`` if
        one is, else ``running``.

        Returns:
            Status -> how many members are in it.

        Raises:
            BrokerError: Redis could not be reached.
        """
        return self._counts(None)[0]

    def _counts_said(self, until: float, done: List[TaskHandle[Any]]) -> str:
        """status()'s counts, as get()'s timeout message gives them: read by ``until``
        (a page at least), those of a big group's first members only when that comes
        first, rather than late; the tasks whose results get() read (``done``) count
        as succeeded unread (get() raises for any other)."""
        counts, read = self._counts(until, {(task._queue, task.id) for task in done})
        if read == len(self.handles):
            return str(counts)
        if not read:  # a nested group's were cut short: this one's cannot be told
            return (f"its members' statuses were not read in the {LOOK_GRACE} s given; "
                    f"call status() to count them")
        return (f"{counts} among its first {read:,} members (of {len(self.handles):,}: "
                f"the others were not read in the {LOOK_GRACE} s given; call status() "
                f"to count them all)")

    def _counts(self, until: Optional[float],
                done: Optional[Set[Tuple[Optional[str], str]]] = None
                ) -> Tuple[Dict[str, int], int]:
        """status()'s counts, and how many members they cover: every one, unless
        ``until`` (``time.monotonic()``) passed first; then those read by then (0 when
        a nested group's were cut short: its own status is not known). The tasks in
        ``done`` (queue, id) succeeded: their states are not read."""
        groups: List[GroupHandle] = []  # this one and those nested in it, outer first
        pending = [self]
        while pending:  # walked without recursion: nested as deep as a record may be
            group = pending.pop()
            groups.append(group)
            pending.extend(handle for handle in group.handles
                           if isinstance(handle, GroupHandle))
        overall: Dict[int, str] = {}
        counts: Dict[str, int] = {}
        for index, group in enumerate(reversed(groups)):  # inner groups first: an
            # outer one reads theirs; the first page read is read whatever the time
            statuses = group._member_statuses(overall, until, index == 0, done or set())
            counts = dict(Counter(statuses))
            if len(statuses) < len(group.handles):
                return (counts, len(statuses)) if group is self else ({}, 0)
            overall[id(group)] = _overall(counts)
        return counts, len(self.handles)

    def _member_statuses(self, overall: Dict[int, str], until: Optional[float],
                         first_free: bool, done: Set[Tuple[Optional[str], str]]
                         ) -> List[str]:
        """The first members' statuses, ``PAGE`` at a time: every member's, unless
        ``until`` passes (the first page read whatever the time with ``first_free``);
        ``overall``: the status of each group nested in this one."""
        statuses: List[str] = []
        for start in range(0, len(self.handles), PAGE):
            if (until is not None and not (first_free and start == 0)
                    and time.monotonic() >= until):
                break
            statuses.extend(self._page_statuses(overall, start, done))
        return statuses

    def _page_statuses(self, overall: Dict[int, str], start: int,
                       done: Set[Tuple[Optional[str], str]]) -> List[str]:
        """The statuses of the ``PAGE`` members from ``start``, two round trips at most."""
        store = self._sender.broker().results
        handles = self.handles[start:start + PAGE]
        entries, finals = self._entries[start:start + PAGE], self._finals[start:start + PAGE]
        tasks = [final for final in finals if final is not None and final not in done]
        read = dict(zip(tasks, (status_of(*state) for state in store.states(tasks))))
        read.update((final, "succeeded") for final in finals if final in done)
        unsent = [entry for entry, final in zip(entries, finals)
                  if final is not None and entry is not None and entry != final
                  and read[final] == "unknown"]
        read.update(zip(unsent, (status_of(*state) for state in store.states(unsent))))
        statuses = []
        for handle, entry, final in zip(handles, entries, finals):
            if isinstance(handle, GroupHandle):
                statuses.append(overall[id(handle)])
            elif final is not None and read[final] == "unknown" and entry in read:
                statuses.append("running" if read[entry] == "succeeded" else read[entry])
            elif final is not None:
                statuses.append(read[final])
        return statuses


def _overall(counts: Dict[str, int]) -> str:
    for status in ("failed", "cancelled"):
        if counts.get(status):
            return status
    if set(counts) <= {"succeeded"}:
        return "succeeded"
    return "running"


def find_group(group_id: str, sender: Sender, result_ttl_ms: int,
               async_broker: "Optional[Callable[[], AsyncBroker]]" = None) -> GroupHandle:
    """The handle of the group ``group_id``, from the record its sending wrote.

    Raises:
        ConfigurationError: no group of this id is known (or its record is not a group's,
            or is larger than ``HANDLE_BYTES``).
        BrokerError: Redis could not be reached.
    """
    broker = sender.broker()
    try:
        asked, not_asked = broker.queues.lookup_names()  # bounded: never every queue
        record = broker.workflows.handle_record(group_id, asked)
    except DecodeError as exc:  # a record larger than any group's minitask rebuilds
        raise ConfigurationError(f"group {group_id!r} cannot be rebuilt: {exc}") from None
    if record is None:
        raise ConfigurationError(
            f"group {group_id!r} is unknown on {broker.description}: no group (or chord "
            f"ending in a group) was sent with this id by this app, or it expired with its "
            f"results (result_ttl); do both programs use the same broker and app name?"
            + (f" (searched the {len(asked):,} queues the app declares and the first of its "
               f"registry; {not_asked:,} more registered names were not searched)"
               if not_asked else ""))
    return rebuild(group_id, record, sender, result_ttl_ms, async_broker)


def describe(handle: Handle) -> Dict[str, Any]:
    """The record ``app.handle`` / ``app.group_handle`` rebuild ``handle`` from: a
    task's queue (``{"t": queue}``), or a group's members, each its first and last
    task (``{"e": [queue, id], "f": [queue, id]}``) or a group (``{"g": ..., "id"}``)."""
    if isinstance(handle, TaskHandle):
        return {"t": handle._queue}
    members: List[Dict[str, Any]] = []
    for member, entry, final in zip(handle.handles, handle._entries, handle._finals):
        if isinstance(member, GroupHandle):
            members.append({"id": member.id, **describe(member)})
        else:
            members.append({"e": None if entry is None else list(entry),
                            "f": None if final is None else list(final)})
    return {"g": members}


def rebuild(group_id: str, record: Any, sender: Sender, result_ttl_ms: int,
            async_broker: "Optional[Callable[[], AsyncBroker]]" = None) -> GroupHandle:
    """The GroupHandle ``record`` (as ``describe`` made it) stands for.

    Raises:
        ConfigurationError: the record is not a group's (the id is a task's), or is
            not one minitask wrote.
    """
    if not isinstance(record, dict) or not isinstance(record.get("g"), list):
        kind = "a task's, not a group's" if isinstance(record, dict) and "t" in record \
            else "not one minitask wrote"
        raise ConfigurationError(f"group {group_id!r}: its handle record is {kind}; use "
                                 f"app.handle(id) for a task")
    handles: List[Handle] = []
    entries: List[Optional[Tuple[str, str]]] = []
    finals: List[Optional[Tuple[str, str]]] = []
    for member in record["g"]:
        if isinstance(member, dict) and "g" in member:
            handles.append(rebuild(_nested_id(member, group_id), member, sender,
                                   result_ttl_ms, async_broker))
            entries.append(None)
            finals.append(None)
            continue
        entry, final = _pair(member, "e", group_id), _pair(member, "f", group_id)
        if final is None:
            raise ConfigurationError(f"group {group_id!r}: its handle record is not one "
                                     f"minitask wrote (a member without its last task)")
        handles.append(StepHandle(sender.broker(), final[0], final[1], result_ttl_ms,
                                  async_broker, before=() if entry in (None, final) else
                                  (entry,)))  # a chain's first task: pending, its last
        # step's marker saying sent is none minitask wrote (ranout.step_gone)
        entries.append(entry)
        finals.append(final)
    return GroupHandle(group_id, handles, entries, finals, sender)


def _nested_id(member: Dict[str, Any], group_id: str) -> str:
    """The id of a group nested in group ``group_id``, as its record holds it."""
    where = f"group {group_id!r}: its handle record is not one minitask wrote"
    try:
        return check_task_id(member.get("id"), where, "group id", "no group can have it")
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where} (a nested group: {printable(str(exc))[-300:]})"
                                 ) from None


def _pair(member: Any, name: str, group_id: str) -> Optional[Tuple[str, str]]:
    value = member.get(name) if isinstance(member, dict) else None
    if value is None:
        return None
    where = f"group {group_id!r}: its handle record is not one minitask wrote"
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(part, str) for part in value)):
        raise ConfigurationError(f"{where} (member {shown_value(member)})")
    try:
        check_name("queue", value[0])
        check_task_id(value[1], where, fix="no task can have it")
    except ValueError as exc:  # ConfigurationError is one too
        raise ConfigurationError(f"{where} (member {shown_value(member)}: "
                                 f"{printable(str(exc))})") from None
    return value[0], value[1]


class HandleLookups:
    """Handles rebuilt from an id, as methods of the app (a mixin of ``Minitask``):
    ``handle`` and ``group_handle``."""

    if TYPE_CHECKING:  # set by the app
        result_ttl: float
        _sender: Sender

        @property
        def broker(self) -> Broker: ...

        def async_broker(self) -> AsyncBroker: ...

    def handle(self, task_id: str) -> TaskHandle[Any]:
        """A handle on a task known only by its id (its queue is looked up).

        Args:
            task_id: the id, as ``handle.id`` gave it.

        Returns:
            A ``TaskHandle``; its status is ``unknown`` for an id the app never saw.

        Raises:
            ConfigurationError: ``task_id`` is not a non-empty str of printable
                characters, of at most 200 bytes (as ``apply_async(task_id=...)``
                requires): no task can have it.
        """
        check_task_id(task_id, "app.handle()", fix="no task can have it")
        return TaskHandle(self.broker, None, task_id, to_ms(self.result_ttl),
                          self.async_broker)

    def group_handle(self, group_id: str) -> GroupHandle:
        """Rebuild a sent group's handle from its id, in any process.

        Args:
            group_id: ``GroupHandle.id`` (of a group, or a workflow ending in one).

        Returns:
            A ``GroupHandle`` with a handle per member, in order.

        Raises:
            ConfigurationError: no group of this id is known (never sent by this
                app here, or expired with its results), or no group can have it (not
                a non-empty str of printable characters, of at most 200 bytes).
            BrokerError: Redis could not be reached.
        """
        check_task_id(group_id, "app.group_handle()", "group_id", "no group can have it")
        return find_group(group_id, self._sender, to_ms(self.result_ttl), self.async_broker)
