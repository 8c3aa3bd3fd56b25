"""ResultStore: outcomes and results: ack, retry, dead-letter, cancel, state, get.

An outcome ends a task's lease and writes what became of it in one atomic
step; results are kept under ``result:<id>`` for ``result_ttl``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..broker.packing import ScriptCall
from ..broker.refusals import broker_error
from ..broker.transport import Transport, text
from ..broker.waits import block_cap
from ..errors import BrokerError, DecodeError
from ..printable import printable
from ..wire.message import Message, Outcome, wall_ms
from ..wire.serializer import decode_message, decode_outcome, encode_message, encode_outcome
from .bounds import message_of, too_large
from .dead import TRIM_MOST, Buried, DeadBounds
from .foreign import foreign, raise_refusals
from .recent import pack_entry
from .store import KEPT_QUEUES, Store

_SCRIPTS = ("ack", "ack_fetch", "retry", "bury", "cancel", "state", "forget", "hash_fields")
#: ARGV of a fetch on the caller's clock (fetch.lua); one on the server's has one less.
FETCH_ARGS = 7

#: One final outcome to record: (queue, task id, encoded outcome, result ttl in ms,
#: its flow: 0 leased without flow control (``Delivery.flow`` False: no spec), 1 its
#: lease may hold a flow control slot, 2 it has at most a spec to drop
#: (``Delivery.slots`` False), its entry in the record of recent outcomes: ``entry``).
Ack = Tuple[str, str, bytes, int, int, bytes]
#: Acks of one queue, each with its place in the caller's list.
_Group = List[Tuple[int, str, bytes, int, int, bytes]]


#: The statuses of a kept result: a task's final outcome (a retry note or a dead
#: letter's record is kept elsewhere).
FINAL_STATUSES = ("succeeded", "failed", "cancelled")


def decode_result(body: bytes, task_id: str, key: str) -> Outcome:
    """A task's kept result, read from its key ``key``.

    Raises:
        DecodeError: no result minitask writes (empty, corrupt, a field of a wrong
            type, a status that is none of ``FINAL_STATUSES``), naming the task, its
            key and the problem.
    """
    what = f"cannot decode the result of task {printable(task_id)!r} (key {printable(key)})"
    if not body:
        raise DecodeError(f"{what}: it is empty (0 bytes): no minitask wrote it")
    try:
        outcome = decode_outcome(body)
    except DecodeError as exc:
        raise DecodeError(f"{what}: {str(exc).replace('cannot decode outcome: ', '', 1)}"
                          ) from None
    if outcome.status not in FINAL_STATUSES:
        raise DecodeError(f"{what}: its status {printable(outcome.status)!r} is none of "
                          f"{', '.join(FINAL_STATUSES)}")
    return outcome


#: A task's status, as ``TaskHandle.status()`` says it, by the state script's reply.
_STATE_TO_STATUS = {"running": "running", "queued": "queued", "scheduled": "scheduled",
                    "retrying": "retrying", "dead": "failed", "unknown": "unknown"}


def status_of(state: str, outcome: Optional[bytes], unreadable: str = "failed") -> str:
    """A status, as ``TaskHandle.status()`` says it, from the state script's reply: an
    ended task whose kept result cannot be read (no minitask wrote it), or a task one
    of whose keys holds another type (``unreadable_why`` says which), is ``unreadable``."""
    if state == "finished":
        return result_status(outcome) or unreadable
    return unreadable if state == "unreadable" else _STATE_TO_STATUS[state]


def unwaitable(key: str, task_id: str, body: Optional[bytes], held: Any) -> DecodeError:
    """Why ``get()`` cannot wait for a pending task: its result key ``key`` holds another
    type (``held``, TYPE's reply) than the list minitask keeps there. Names the task by
    its message ``body`` (None: unread) and id, the key, and what to do."""
    task = f"{printable(task_id)!r}"
    try:
        task = f"{printable(decode_message(body).task)!r} (id {task})" if body else task
    except DecodeError:
        pass  # a message minitask did not write either: the id alone
    return DecodeError(
        f"cannot wait for the result of task {task}: key "
        f"{printable(key)} holds a {printable(text(held))}, not the list minitask keeps a "
        f"result in (data minitask did not write); the task is still pending, and its "
        f"outcome replaces the key whole when it ends: delete the key to wait for it, or "
        f"follow it with status()")


def unreadable_why(state: str, why: Optional[bytes]) -> Optional[str]:
    """What the state script found unreadable (a key of another type, named), as
    ``state_of`` reads it; None for any other state."""
    return why.decode("utf-8", "replace") if state == "unreadable" and why else None


def readable_state(reply: Tuple[str, Optional[bytes]], task_id: str) -> str:
    """The state in ``state``'s ``reply``.

    Raises:
        DecodeError: one of the task's keys holds another type than minitask keeps
            there (the state cannot be read), naming the task and the key.
    """
    why = unreadable_why(*reply)
    if why is not None:
        raise DecodeError(f"cannot read the state of task {printable(task_id)!r}: {why}")
    return reply[0]


def result_status(body: Optional[bytes]) -> Optional[str]:
    """The status of a task's kept result (one of ``FINAL_STATUSES``); None when it
    cannot be read (``decode_result`` says why)."""
    try:
        return decode_result(body or b"", "", "").status
    except DecodeError:
        return None


#: Queues asked at once, in one round trip, when a task is looked up by its id alone.
FIND_BATCH = 500


def _flow_keys(group: _Group) -> bytes:
    """The flow keys an ack of ``group`` passes (ack.lua, ack_fetch.lua): b"1" all four
    when any task's lease may hold a slot, b"2" the flow hash alone when any has a spec
    but none a slot, b"0" none."""
    passed = b"0"
    for entry in group:
        if entry[4] == 1:
            return b"1"
        if entry[4] == 2:
            passed = b"2"
    return passed


class ResultStore(Store):
    """What became of the tasks of one app, and the steps that decide it."""

    scripts = _SCRIPTS
    #: Entries each queue's record of recent outcomes shows (the app's
    #: ``recent_outcomes``; Redis keeps up to a stream node more); 0: no record, and
    #: no script writes one.
    recent_length = 0
    #: How many dead letters each queue keeps, and how long (the app's settings).
    dead_bounds = DeadBounds()

    def __init__(self, transport: Transport, app_name: str) -> None:
        super().__init__(transport, app_name)
        #: ``ack_then``'s words for an error, by queue
        self._ack_then_what: Dict[str, str] = {}
        #: ``_ack_fetch_call``'s keys by queue, with the fetch keys they were made from
        self._ack_fetch_keys: Dict[str, Tuple[Sequence[str], Tuple[str, ...]]] = {}

    def entry(self, task_id: str, name: str, state: str, at_ms: int, attempt: int,
              duration: Optional[float] = None, worker: str = "", error: str = "") -> bytes:
        """An outcome's entry in its queue's record of recent outcomes (stores/recent.py),
        for the script that records the outcome; b"" (nothing written) when the record
        is off."""
        if not self.recent_length:
            return b""
        return pack_entry(task_id, name, state, at_ms, attempt, duration, worker, error)

    # -- final outcomes ------------------------------------------------------------

    @staticmethod
    def prepare_ack(queue: str, task_id: str, outcome: Optional[Outcome], result_ttl_ms: int,
                    *, task_name: str = "?", flow: bool = True, slots: bool = True,
                    entry: bytes = b"") -> Ack:
        """A final outcome (None: keep none) encoded for ``ack_many``; ``flow`` False
        for a task leased without flow control (``Delivery.flow``): its ack passes no
        flow keys; ``slots`` False for one whose lease holds no flow control slot
        (``Delivery.slots``): its ack drops its spec only; ``entry`` its entry in the
        record of recent outcomes (``entry``).

        Raises EncodeError when the outcome's value cannot be encoded: nothing
        is sent, and the caller dead-letters the task instead.
        """
        code = (1 if slots else 2) if flow else 0
        if outcome is None or result_ttl_ms <= 0:
            # a ttl of 0 or less keeps no result (ignore_result): none is encoded or sent
            return (queue, task_id, b"", 0, code, entry)
        # ack.lua reads any other ttl as a result key passed
        return (queue, task_id, encode_outcome(outcome, task_name=task_name),
                result_ttl_ms, code, entry)

    def ack(self, queue: str, task_id: str, outcome: Optional[Outcome], result_ttl_ms: int,
            *, task_name: str = "?") -> bool:
        """Record one task's final outcome (None: keep none); False when its lease had
        been lost. Raises EncodeError, before anything is sent, for a value that
        cannot be encoded."""
        return self.ack_many([self.prepare_ack(queue, task_id, outcome, result_ttl_ms,
                                               task_name=task_name)])[0]

    def ack_many(self, acks: Sequence[Ack]) -> List[bool]:
        """Record final outcomes (from ``prepare_ack``) in one round trip.

        Returns, in the given order, whether the caller still held each lease.
        """
        what = f"record the result of {', '.join(ack[1] for ack in acks[:3])}"
        groups = self._ack_groups(acks)
        return self._held(groups, self.transport.run_calls(self._ack_calls(groups), what),
                          len(acks))

    def ack_then(self, acks: Sequence[Ack], then: ScriptCall) -> Tuple[List[bool], Any]:
        """``ack_many``, then the call ``then`` (a fetch: the drain loop's hot path),
        in the same round trip; returns the held flags and the reply of ``then`` (its
        BrokerError when Redis refused it alone, the acks written).

        Acks of the queue of a fetch on the caller's clock go with it as one call
        (ack_fetch.lua), which costs Redis a script call and six keys less.
        """
        groups = self._ack_groups(acks)
        what = self._ack_then_what.get(then[1]) or self.ack_then_what(then[1])
        joined = self.ack_fetch_call(acks, then, groups)
        if joined is not None:
            reply = self.transport.run_calls([joined], what)[0]
            return self.ack_fetch_reply(reply, len(acks), what)
        calls = self._ack_calls(groups)
        # a refused ``then`` (its queue's data) leaves the acks standing: its BrokerError
        # comes in its place, for the caller; a refused ack is raised, as ever
        replies = self.transport.run_calls(calls + [then], what, keep_refused=True)
        for reply in replies[:len(calls)]:
            if isinstance(reply, BrokerError):
                raise reply
        return self._held(groups, replies[:len(calls)], len(acks)), replies[-1]

    def ack_then_what(self, queue: str) -> str:
        """What a failed ``ack_then`` says it did (the same words for every call of
        the drain loop: made once a queue)."""
        what = self._ack_then_what.get(queue)
        if what is None:
            what = self._ack_then_what[queue] = f"record results and fetch from queue {queue!r}"
        return what

    def ack_fetch_call(self, acks: Sequence[Ack], then: ScriptCall,
                       groups: Optional[Dict[str, _Group]] = None) -> Optional[ScriptCall]:
        """``ack_then``'s one call (ack_fetch.lua), for a caller that sends it itself (the
        asyncio pool's loop), or None when the acks and the fetch do not make one (acks
        of other queues, a fetch on the server's clock): ``ack_then`` sends those."""
        groups = self._ack_groups(acks) if groups is None else groups
        if then[0] == "fetch" and len(then[3]) == FETCH_ARGS and then[3][0] != "server" \
                and len(groups) == 1 and then[1] in groups:
            return self._ack_fetch_call(groups[then[1]], then)
        return None

    def ack_fetch_reply(self, reply: Any, size: int, what: str) -> Tuple[List[bool], Any]:
        """The reply of an ``ack_fetch_call`` of ``size`` acks: which leases were still
        held, in the acks' order, and the fetch's reply (its BrokerError when Redis
        refused the fetch alone, the acks written)."""
        held = [False] * size
        for index, flag in enumerate(text(reply[-1])):  # ack.lua's, as digits
            if index < size:
                held[index] = flag == "1"
        if isinstance(reply[0], Exception):  # the fetch refused, the acks written
            return held, broker_error(reply[0], what, self.transport.description,
                                      script="fetch")
        return held, reply[:-1]

    def _ack_fetch_call(self, group: _Group, fetch: ScriptCall) -> ScriptCall:
        """The acks of one queue and a fetch from it as one call (ack_fetch.lua)."""
        _, queue, fetch_keys, fetch_args, _ = fetch
        k = self.keys_of(queue)
        kept = self._ack_fetch_keys.get(queue)
        if kept is None or kept[0] is not fetch_keys:  # made once a queue, as a fetch's
            if len(self._ack_fetch_keys) >= KEPT_QUEUES:
                self._ack_fetch_keys.clear()
            kept = self._ack_fetch_keys[queue] = (fetch_keys, (*fetch_keys, k.retrying, k.recent))
        tail: List[Any] = []
        for entry in group:  # a loop: a list comprehension makes a function per call
            if entry[3] > 0:
                tail.append(k.result(entry[1]))
        keys = len(tail)
        tail += fetch_args
        tail += (_flow_keys(group), self.recent_length)
        for entry in group:
            tail += (*entry[1:4], entry[5])
        return ("ack_fetch", queue, kept[1], tail, keys)

    @staticmethod
    def _held(groups: Dict[str, _Group], replies: Sequence[Any], size: int) -> List[bool]:
        held = [False] * size
        for group, reply in zip(groups.values(), replies):
            for entry, flag in zip(group, reply):
                held[entry[0]] = bool(flag)
        return held

    def _ack_calls(self, groups: Dict[str, _Group]) -> List[ScriptCall]:
        """One ack script call per queue."""
        calls: List[ScriptCall] = []
        for queue, group in groups.items():
            k = self.keys(queue)
            # a result key only for a task that keeps a result (ack.lua)
            tail: List[Any] = [k.result(entry[1]) for entry in group if entry[3] > 0]
            # the flow keys unless every task was leased without flow control, the flow
            # hash alone when none holds a slot (ack.lua)
            passed = _flow_keys(group)
            if passed == b"1":
                tail += (k.flow, k.flow_due, k.flow_prefix, k.wake)
            elif passed == b"2":
                tail.append(k.flow)
            keys = len(tail)
            tail.append(self.recent_length)
            for entry in group:
                tail += (*entry[1:4], entry[5])
            calls.append(("ack", queue, (k.leases, k.delayed, k.messages, k.deliveries,
                                         k.retrying, k.order, k.recent), tail, keys))
        return calls

    @staticmethod
    def _ack_groups(acks: Sequence[Ack]) -> Dict[str, _Group]:
        """The acks by queue, each with its place in the caller's list."""
        groups: Dict[str, _Group] = {}
        for index, (queue, task_id, outcome, ttl_ms, flow, entry) in enumerate(acks):
            groups.setdefault(queue, []).append((index, task_id, outcome, ttl_ms, flow, entry))
        return groups

    def retry(self, queue: str, following: Message, due_ms: int, note: Outcome,
              entry: bytes = b"") -> bool:
        """Schedule ``following`` (the next attempt) at ``due_ms``; ``note`` says why,
        ``entry`` goes in the record of recent outcomes."""
        task_id = following.id
        k = self.keys(queue)
        done = self.transport.run(
            "retry", (k.leases, k.delayed, k.messages, k.deliveries, k.retrying, k.wake,
                      k.order, k.sequence, k.flow, k.flow_due, k.flow_prefix, k.recent),
            (task_id, encode_message(following), due_ms, following.priority,
             encode_outcome(note), self.recent_length, entry),
            f"schedule a retry of {task_id}")
        return bool(done)

    def bury(self, queue: str, task_id: str, *, outcome: Outcome, result_ttl_ms: int,
             entry: bytes = b"") -> Buried:
        """Move a task to the dead letters with ``outcome`` saying why (and when);
        ``entry`` goes in the record of recent outcomes. False (``Buried.done``): it was
        not leased nor delayed here (someone else holds it); ``Buried.deleted``: how many
        of the oldest dead letters its bounds (``dead_bounds``) deleted."""
        k = self.keys(queue)
        done = self.transport.run(
            "bury", (k.leases, k.delayed, k.messages, k.deliveries, k.retrying, k.dead,
                     k.dead_info, k.result(task_id), k.order, k.flow, k.flow_due,
                     k.flow_prefix, k.wake, k.flow_dead, k.recent, k.dead_trimmed),
            (task_id, outcome.finished_at_ms, encode_outcome(outcome), result_ttl_ms,
             self.recent_length, entry, self.dead_bounds.most, self.dead_bounds.ttl_ms,
             TRIM_MOST),
            f"dead-letter {task_id}")
        return Buried(bool(int(done[0])), int(done[1]))

    def cancel(self, queue: str, task_id: str, result_ttl_ms: int) -> Optional[bytes]:
        """Withdraw a task that has not started: the message it withdrew (its workflow
        goes on from it), or None when it started, ended or is unknown."""
        try:
            body = message_of(self.transport, self.keys(queue).messages, task_id,
                              self.bounds.message)
        except DecodeError:  # too large, not read: withdrawn as one that cannot be decoded
            body = b""
        if body is None:
            return None  # finished, cancelled already, or never here
        name, _, static, tail, dynamic = self.cancel_call(queue, task_id, body, result_ttl_ms)
        done = self.transport.run(name, [*static, *tail[:dynamic]], tail[dynamic:],
                                  f"cancel {task_id}")
        return body if done else None

    def cancel_call(self, queue: str, task_id: str, body: bytes,
                    result_ttl_ms: int) -> ScriptCall:
        """The cancel script call for a task whose message is ``body`` (the async
        handle sends the same one)."""
        k = self.keys(queue)
        now_ms = wall_ms()
        try:
            message = decode_message(body)
        except DecodeError:
            priority = -1  # unknown: its stale entry is counted as ready until fetch drops it
            entry = self.entry(task_id, "?", "cancelled", now_ms, 0)
        else:
            priority = message.priority
            entry = self.entry(task_id, message.task, "cancelled", now_ms, 0,
                               error="Cancelled: cancelled before it started")
        # The priority read above can only be stale if the id finished and was enqueued
        # again in between; then one count is off until fetch drops the entry.
        outcome = encode_outcome(Outcome("cancelled", now_ms, exc_type="Cancelled",
                                         message="cancelled before it started"))
        # the task's own result key, and those after it, travel as dynamic keys: a call
        # packed ahead of time keeps its static keys for every later call of the queue
        return ("cancel", queue, (k.delayed, k.leases, k.dead, k.messages, k.retrying),
                (k.result(task_id), k.deliveries, k.order, k.cancelled, k.flow,
                 k.flow_prefix, k.flow_due, k.wake, k.recent, k.flow_limiters, k.flow_parked,
                 task_id, outcome, result_ttl_ms, priority, self.recent_length, entry), 11)

    def forget_call(self, queue: str, task_id: str) -> ScriptCall:
        """The forget script call: drops a finished task's result and progress in one
        step, or leaves a task that may still run as it is (the async handle sends the
        same one)."""
        k = self.keys(queue)
        return ("forget", queue, (k.leases, k.delayed, k.messages, k.dead),
                (k.result(task_id), k.progress(task_id), task_id), 2)

    def forget(self, queue: str, task_id: str) -> bool:
        """Drop a finished task's kept result; False when there was none to drop or
        the task is not finished (then nothing changed)."""
        name, _, static, tail, dynamic = self.forget_call(queue, task_id)
        return bool(self.transport.run(name, [*static, *tail[:dynamic]], tail[dynamic:],
                                       f"forget the result of {task_id}"))

    # -- reading ---------------------------------------------------------------------

    def state(self, queue: str, task_id: str) -> Tuple[str, Optional[bytes]]:
        """Where a task is (queued, running, dead, finished, ...), and its outcome."""
        name, _, static, tail, dynamic = self.state_call(queue, task_id)
        return self.state_of(self.transport.run(name, [*static, *tail[:dynamic]],
                                                tail[dynamic:], f"read the state of {task_id}"))

    def state_call(self, queue: str, task_id: str) -> ScriptCall:
        """The state script call (the async handle sends the same one)."""
        k = self.keys(queue)
        return ("state", queue, (k.leases, k.delayed, k.retrying, k.dead, k.messages),
                (k.result(task_id), task_id, self.bounds.outcome), 1)  # its own result key: dynamic

    def states(self, tasks: Sequence[Tuple[str, str]]) -> List[Tuple[str, Optional[bytes]]]:
        """Where each (queue, task id) is, as ``state`` says, in one round trip where
        the connection allows."""
        calls = [self.state_call(queue, task_id) for queue, task_id in tasks]
        replies = self.transport.run_calls(calls, f"read the state of {len(calls)} task(s)")
        return [self.state_of(reply) for reply in replies]

    @staticmethod
    def state_of(reply: Any) -> Tuple[str, Optional[bytes]]:
        """The state script's reply, read: (state, its outcome); for ``unreadable``,
        what cannot be read: the key, named, and the types it holds and should."""
        state, outcome = reply[0], reply[1]  # an entry of 0 bytes is one: unreadable
        if text(state) == "too large":  # measured, not read: longer than minitask writes
            key, length = text(reply[1]), int(reply[2])
            memory = len(reply) > 3  # MEMORY USAGE's figure, not the value's own length
            return "unreadable", too_large(key, None, length, memory=memory).encode("utf-8")
        if text(state) == "unreadable":
            key, held, kept = (text(part) for part in reply[1:4])
            return "unreadable", (f"key {printable(key)} holds a {printable(held)}, not the "
                                  f"{kept} minitask keeps there: no minitask wrote it"
                                  ).encode("utf-8")
        return text(state), outcome if isinstance(outcome, bytes) else None

    def wait_result(self, queue: str, task_id: str, timeout: float) -> Optional[bytes]:
        """Block until the task's outcome exists (at most ``timeout`` seconds, capped).

        Raises:
            DecodeError: its result key holds another type (``unwaitable``).
            BrokerError: Redis failed.
        """
        key = self.keys(queue).result(task_id)
        seconds = min(max(timeout, 0.002), block_cap(self.transport.client))
        try:
            return self.transport.wait_result(key, seconds, f"wait for the result of {task_id}")
        except BrokerError as exc:
            if not foreign(exc):
                raise
        with self.transport.errors(f"read task {task_id}, whose result key is not minitask's"):
            held = self.transport.client.type(key)
        try:
            body = message_of(self.transport, self.keys(queue).messages, task_id,
                              self.bounds.message)
        except DecodeError:  # too large to be minitask's: no name read from it
            body = None
        raise unwaitable(key, task_id, body, held) from None

    def find_queue(self, task_id: str, queues: Sequence[str]) -> Optional[str]:
        """The first queue among ``queues`` that knows ``task_id``, if any: the first
        one alone (the caller puts the likeliest first), then the rest
        ``FIND_BATCH`` at a time, a round trip each where the connection allows."""
        if not queues:
            return None
        # a queue whose keys cannot be read (another type) is the answer only when no
        # other knows the id: the first such, where its status names the key
        state = self.state(queues[0], task_id)[0]
        if state not in ("unknown", "unreadable"):
            return queues[0]
        unread = queues[0] if state == "unreadable" else None
        for start in range(1, len(queues), FIND_BATCH):
            batch = queues[start:start + FIND_BATCH]
            # two plain reads per queue pick the candidates (a task that is anywhere
            # has its message or its outcome): a script call per queue cost 2 s for
            # 20,000; a key of another type (not minitask's) leaves it to the script
            with self.transport.errors(f"find the queue of {task_id}"):
                pipe = self.transport.client.pipeline(transaction=False)
                for queue in batch:
                    k = self.keys(queue)
                    pipe.hexists(k.messages, task_id)
                    pipe.exists(k.result(task_id))
                replies = pipe.execute(raise_on_error=False)
                raise_refusals(replies)
            for index, queue in enumerate(batch):
                if any(reply is not False and reply != 0
                       for reply in replies[2 * index:2 * index + 2]):
                    state = self.state(queue, task_id)[0]
                    if state not in ("unknown", "unreadable"):
                        return queue
                    unread = unread or (queue if state == "unreadable" else None)
        return unread
