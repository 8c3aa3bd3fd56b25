"""FlowStore: enqueueing calls with flow control, and reading limiter state.

Limits are enforced by the scripts that hand tasks out and end them (fetch, ack,
retry, bury, release, end_cancelled: ``lua/flow.lua`` in front of each); this
store writes what they read: a spec beside each flow-controlled message, in the
same step.
"""
from __future__ import annotations

from contextlib import suppress
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, cast

from ..broker.durability import Durability
from ..broker.keys import queue_keys
from ..broker.packing import ScriptCall
from ..broker.transport import Transport, text
from ..errors import BrokerError
from ..limits import MAX_GROUP_LENGTH
from ..printable import printable, shown_name
from .bounds import TooLarge, read_fields, too_large
from .flow_rearm import Rearming, make_due, rearm, waiting_groups, waiting_limiters
from .foreign import ignored, move_aside, raise_refusals, removed_members, shown_member, whole
from .queue import QueueStore, after_write
from .store import Store

#: A limiter due later than this from now was not made due by minitask: a rate
#: window is an hour at most, and a retry time is within one window.
STUCK_AFTER_MS = 2 * 3_600_000

#: The longest flow spec a reader reads (``limits.pack``: a task name of up to 1,000
#: bytes, a limit key and a group of up to 200 characters, and numbers), with room:
#: a longer one is no spec minitask wrote, measured and never read.
SPEC_BYTES = 16_384

#: One checked message: (id, body, priority, due ms or 0), as ``Sender.prepare`` makes it.
Entry = Tuple[str, bytes, int, int]


class FlowStore(Store):
    """Flow-controlled enqueues of one app, through the queue store's enqueue call."""

    scripts = ("enqueue_flow", "enqueue_group", "hash_fields", "groups_top", "paused_page")

    def __init__(self, transport: Transport, app_name: str, queues: QueueStore) -> None:
        super().__init__(transport, app_name)
        self.queues = queues
        self.rearming = Rearming()

    def enqueue_call(self, queue: str, entries: Sequence[Entry],
                     specs: Mapping[str, str], now_ms: int) -> ScriptCall:
        """The plain enqueue call of ``entries``, with the flow hash added as the last
        key and each message's spec (by id; none: an empty spec) as the last ARGVs."""
        _, slot, static_keys, tail, dynamic = self.queues.enqueue_call(queue, entries, now_ms)
        k = queue_keys(self.app_name, queue)
        args: List[Any] = list(tail)
        specs_sent = [specs.get(entry[0], "") for entry in entries]
        # a grouped spec goes on past its sixth line (limits.pack): such a send joins
        # groups in a script of its own, and any other costs what it did
        grouped = any(spec.count("\n") > 5 for spec in specs_sent)
        # (leases and dead: read only to check a solo claim, flow.lua's owned())
        args[dynamic:dynamic] = ([k.flow, k.leases, k.dead, k.cancelled, k.flow_prefix]
                                 if grouped else [k.flow])
        args += specs_sent
        args.append(len(entries))
        return ("enqueue_group" if grouped else "enqueue_flow", slot, static_keys, args,
                dynamic + (5 if grouped else 1))

    def enqueue(self, queue: str, chunk: Sequence[Entry], specs: Mapping[str, str],
                now_ms: int, durability: Optional[Durability] = None) -> int:
        """Enqueue one chunk of checked entries (``Sender.send`` cuts a call in chunks
        and says which were enqueued); how many were new. ``durability`` (default: the
        app's) says how replicas confirm the write. The queue is listed as soon as the
        chunk is written (or may be: unconfirmed, or its reply lost), so its tasks are
        findable by id whatever a later chunk meets."""
        try:
            added = self.transport.run_calls([self.enqueue_call(queue, chunk, specs, now_ms)],
                                             f"enqueue into queue {queue!r}", durability)[-1]
        except BrokerError as exc:
            if exc.sent:
                with suppress(BrokerError):  # (the connection that lost the reply: said)
                    self.queues.register_queues([queue], again=True)
            raise
        with after_write():
            self.queues.register_queues([queue], again=True)
        return int(added)

    def send_together(self, by_queue: Mapping[str, List[Entry]], specs: Mapping[str, str],
                      now_ms: int, chunk: int) -> int:
        """Enqueue the entries of several queues in one write (an ``app.batch()``
        block): ``QueueStore.enqueue_queues``, a chunk that holds a flow-controlled or
        grouped call (``specs``, by id) through the flow enqueue (enqueue_flow.lua,
        enqueue_group.lua), each still all or nothing; how many were new."""
        def call(queue: str, entries: Sequence[Entry], at_ms: int) -> ScriptCall:
            if any(entry[0] in specs for entry in entries):
                return self.enqueue_call(queue, entries, specs, at_ms)
            return self.queues.enqueue_call(queue, entries, at_ms)
        return self.queues.enqueue_queues(dict(by_queue), now_ms, chunk, call)

    def limiter_state(self, queue: str, limiter: str) -> Dict[str, Any]:
        """Parked, running and recently started counts of one limiter (for tests and
        operators); ``limiter`` as the flow spec names it."""
        k = queue_keys(self.app_name, queue)
        base = k.flow_prefix + limiter
        with self.transport.errors(f"read limiter {limiter!r} of queue {queue!r}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.llen(base + ":park")
            pipe.smembers(base + ":running")
            pipe.zcard(base + ":starts")
            pipe.zscore(k.flow_due, limiter)
            parked, running, starts, due = pipe.execute()
        # a due score no minitask wrote (inf, 1.5) is read as none, never a traceback
        return {"parked": whole(parked, 0, _MOST) or 0,
                "running": sorted(text(m) for m in running),
                "starts": int(starts), "due_ms": whole(due)}

    def parked(self, queue: str) -> int:
        """Tasks of ``queue`` parked by their limits: ready, though not handed out yet.

        One read of the count the fetches keep (``flow_parked``): the same cost with
        ten limiters or a million."""
        return self.parked_many([queue])[queue]

    def parked_many(self, queues: Sequence[str]) -> Dict[str, int]:
        """``parked`` of each queue, in one round trip whatever their number.

        Each count is measured (STRLEN) and only its first ``COUNT_BYTES`` read
        (GETRANGE): a value longer than a count (planted: 50 MB, sent whole to every
        status call, page and scrape) is read as none, said once with its length, and
        left for the fetches: the next that parks or takes a task starts it afresh
        (fetch.lua; a delete here could race a fetch's count)."""
        keys = [queue_keys(self.app_name, queue) for queue in queues]
        with self.transport.errors(f"count the parked tasks of {len(keys)} queue(s)"):
            pipe = self.transport.client.pipeline(transaction=False)
            for k in keys:
                pipe.strlen(k.flow_parked)
                pipe.getrange(k.flow_parked, 0, COUNT_BYTES - 1)
            replies = pipe.execute(raise_on_error=False)
        found = {}
        for index, (queue, k) in enumerate(zip(queues, keys)):
            length, count = replies[2 * index:2 * index + 2]
            if isinstance(length, int) and length > COUNT_BYTES:
                ignored(k.flow_parked, f"it holds a value of {length:,} bytes, longer than "
                                       f"any count minitask writes; read as no count")
                count = None
            # a key of another type, or no count (data minitask did not write): none
            found[queue] = whole(count, 0, _MOST) or 0
        return found

    def unstick(self, queues: Sequence[str], now_ms: int) -> int:
        """Make due now the limiters of ``queues`` whose due time is later than any
        limit sets (a rate window is an hour at most): no minitask wrote it, and it
        would park their tasks for years. Two round trips at most, one when none is;
        returns how many were made due, each said once. A flow_due of another type is
        moved aside and every waiting limiter and group made due (``_due_lost``).
        Every ``REARM_EVERY_MS`` (the first a period after the start, which did it),
        each limiter with parked tasks and no due time is made due too (flow_rearm.py:
        one whose holders' flow specs were lost waits for no outcome)."""
        horizon = now_ms + STUCK_AFTER_MS
        dues = [queue_keys(self.app_name, queue).flow_due for queue in queues]
        with self.transport.errors("look for limiters due too late"):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in dues:
                pipe.zrangebyscore(key, horizon, "+inf", start=0, num=16)
            found = pipe.execute(raise_on_error=False)
            raise_refusals(found)
            stuck = [(key, limiter) for key, limiters in zip(dues, found)
                     if not isinstance(limiters, Exception) for limiter in limiters]
        for queue, key, limiters in zip(queues, dues, found):
            if isinstance(limiters, Exception):  # no limiter of the queue comes due then
                with self.transport.errors(f"re-arm the limiters of queue {queue!r}"):
                    self._due_lost(queue, now_ms)
        with self.transport.errors("make limiters due"):
            if stuck:
                pipe = self.transport.client.pipeline(transaction=False)
                for key, limiter in stuck:
                    pipe.zadd(key, {limiter: now_ms}, xx=True)
                raise_refusals(pipe.execute(raise_on_error=False))
        for key, limiter in stuck:
            ignored(key, f"limiter {shown_member(limiter)} was due later than any limit "
                         f"sets; made due now")
        if self.rearming.due(now_ms):  # every REARM_EVERY_MS: flow_rearm.py
            failed: List[BrokerError] = []
            for queue in queues:  # (one queue's refusal stops no other's)
                try:
                    with self.transport.errors(f"re-arm the limiters of queue {queue!r}"):
                        rearm(self.transport, self.app_name, queue, now_ms)
                except BrokerError as exc:
                    failed.append(exc)
            if failed:
                raise failed[0]
        return len(stuck)

    def specs(self, queue: str) -> Dict[str, str]:
        """Every flow spec of the queue, by id (a leak shows here)."""
        with self.transport.errors(f"read the flow specs of queue {queue!r}"):
            raw = self.transport.client.hgetall(queue_keys(self.app_name, queue).flow)
        return {text(key): text(value) for key, value in raw.items()}

    def pause_group(self, queue: str, group: str) -> None:
        """Hold a group's ready tasks: a fetch meeting its token drops it.

        Raises:
            BrokerError: Redis could not be reached, or (``reason`` "wrong type") the
                set of paused groups is a key of another type (named; nothing changed).
        """
        k = queue_keys(self.app_name, queue)
        what = f"pause group {printable(group)!r} of queue {queue!r}"
        with self.transport.errors(what):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.sadd(k.groups_paused, group)
            added = pipe.execute(raise_on_error=False)
            raise_refusals(added)
        if isinstance(added[0], Exception):
            raise BrokerError(f"could not {what}: {_paused_problem(k.groups_paused)} "
                              f"(nothing was changed)", reason="wrong type")

    def resume_group(self, queue: str, group: str) -> bool:
        """Serve a paused group again; False when it was not paused. Its ready tasks
        come back into the rotation at the next fetch (a waiting worker is woken); a
        flow_due of another type, which would take no entry, is moved aside first.

        Raises:
            BrokerError: Redis could not be reached, or (``reason`` "wrong type") the
                set of paused groups is a key of another type (named: it pauses no
                group, and the group is served meanwhile).
        """
        k = queue_keys(self.app_name, queue)
        what = f"resume group {printable(group)!r} of queue {queue!r}"
        with self.transport.errors(what):
            pipe = self.transport.client.pipeline(transaction=True)
            pipe.srem(k.groups_paused, group)
            pipe.zadd(k.flow_due, {f"g:{group}": 0})
            pipe.rpush(k.wake, b"1")
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
            if isinstance(replies[1], Exception):
                # a flow_due of another type took no entry: the group would never come
                # back into the rotation. Moved aside whole, as the scripts do
                move_aside(self.transport.client, k.flow_due, "sorted set")
                pipe = self.transport.client.pipeline(transaction=True)
                pipe.zadd(k.flow_due, {f"g:{group}": 0})
                pipe.rpush(k.wake, b"1")
                raise_refusals(pipe.execute(raise_on_error=False))
        if isinstance(replies[0], Exception):
            raise BrokerError(f"could not {what}: {_paused_problem(k.groups_paused)}; "
                              f"until then it pauses no group: its tasks are served",
                              reason="wrong type")
        return bool(replies[0])

    def _due_lost(self, queue: str, now_ms: int) -> None:
        """A flow_due of another type holds no limiter's nor group's due time: no fetch
        reads one, so their tasks would wait for good. It is moved aside, and every
        limiter with parked tasks and every group with ready tasks made due now (their
        times were in it): a fetch tries each (one not free yet is timed again),
        ``REARM_MOST`` of each at most (the others by their next task or outcome)."""
        k = queue_keys(self.app_name, queue)
        move_aside(self.transport.client, k.flow_due, "sorted set")
        groups = waiting_groups(self.transport, k, queue, _MOST, GROUP_BYTES, COUNT_BYTES)
        make_due(self.transport, k, waiting_limiters(self.transport, k)
                 + [b"g:" + name for name in groups], now_ms)

    def rearm_waiting(self, queue: str, now_ms: int) -> int:
        """At a worker's start: make due now each limiter of ``queue`` with parked tasks
        and each group with ready tasks that has neither a due time nor a live token
        (``REARM_MOST`` of each at most): one waiting for a slot whose holder's flow
        spec was lost (deleted, overwritten) would wait for good, as that outcome
        frees nothing. A fetch tries each: one still full leaves again, having freed
        any holder whose spec no longer names it (flow.lua's vacate). Returns how
        many were made due; a key of another type is left to the fetches. The
        heartbeat does the same for the limiters (``unstick``, flow_rearm.py)."""
        return rearm(self.transport, self.app_name, queue, now_ms,
                     (_MOST, GROUP_BYTES, COUNT_BYTES))

    def paused_group_of(self, queue: str, task_id: str) -> Optional[str]:
        """The group of a grouped task (fair queues) when that group is paused, else
        None: its flow spec's group (its last line), then SISMEMBER of the paused."""
        k = queue_keys(self.app_name, queue)
        # measured first: a spec longer than any minitask writes is never read
        spec = read_fields(self.transport, [(k.flow, task_id, SPEC_BYTES)],
                           f"read the group of task {task_id} in queue {queue!r}")[0]
        if isinstance(spec, TooLarge):
            too_large(k.flow, task_id, spec.length, SPEC_BYTES)
        with self.transport.errors(f"read the group of task {task_id} in queue {queue!r}"):
            parts = spec.split(b"\n", 9) if isinstance(spec, bytes) else []
            if len(parts) < 10 or not parts[9]:
                return None  # no spec, ungrouped, or one no minitask wrote
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.sismember(k.groups_paused, cast(Any, parts[9]))  # bytes: as stored
            paused = pipe.execute(raise_on_error=False)[0]
        if paused is not True and paused != 1:
            return None
        return _group_shown(parts[9])

    def set_group_weight(self, queue: str, group: str, weight: int) -> None:
        """Give a group ``weight`` fetches a turn (1: the default, kept as no entry).

        Raises:
            BrokerError: Redis could not be reached, or (``reason`` "wrong type") the
                hash of the groups' weights is a key of another type (named, as
                ``pause_group`` names its set; nothing changed).
        """
        k = queue_keys(self.app_name, queue)
        what = f"set the weight of group {printable(group)!r} of queue {queue!r}"
        with self.transport.errors(what):
            pipe = self.transport.client.pipeline(transaction=False)
            if weight == 1:
                pipe.hdel(k.groups_weight, group)
            else:
                pipe.hset(k.groups_weight, group, weight)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        if isinstance(replies[0], Exception):
            problem = _foreign_problem(k.groups_weight, "the groups' weights, a hash")
            raise BrokerError(f"could not {what}: {problem} (nothing was changed)",
                              reason="wrong type")

    def group_counts_many(self, queues: Sequence[str], largest: int = 5) -> Dict[str, Any]:
        """Per queue with grouped ready tasks: ``grouped`` (how many), ``groups`` (how
        many groups hold them) and ``largest_groups`` (the ``largest`` backlogs, as
        (group, ready tasks), largest first). One round trip whatever the number.

        ``groups`` counts the entries whose score can be a count of ready tasks (a
        ZCOUNT from 1 to the largest count: entries minitask did not write, of a score
        of 0, negative, past it or not finite, are not counted; one of a fractional
        score is, as only a read of each could tell). ``grouped`` is the queue's counter,
        or when it is gone (or not minitask's) the sum of the backlogs read: exact when
        every group was read (``largest`` or fewer), a lower bound otherwise. Solo groups
        of plain tasks (``groups_solo``: one ready task each) count in both, and fill
        ``largest_groups`` when fewer other groups are read; ``solo`` says how many there
        are (their tasks' tokens count them in the ready lists too)."""
        keys = [queue_keys(self.app_name, queue) for queue in queues]
        # (groups_top.lua: a name longer than any group's is removed, never sent)
        replies = self.transport.run_calls(
            [("groups_top", queue, (k.groups_ready, k.groups, k.groups_solo),
              (_MOST, largest, GROUP_BYTES, COUNT_BYTES), 0)
             for queue, k in zip(queues, keys)],
            f"count the groups of {len(keys)} queue(s)") if keys else []
        found: Dict[str, Any] = {}
        for index, queue in enumerate(queues):
            ready, count, flat, removed, longer, solo, solo_names = replies[index]
            removed_members(keys[index].groups, removed, "group name")
            if longer:  # measured, never sent (groups_top.lua)
                ignored(keys[index].groups_ready,
                        f"it holds a value of {int(longer):,} bytes, longer than any "
                        f"count minitask writes; read as no count")
            if count is None or flat is None:
                continue  # another type (data minitask did not write): none shown
            top = list(zip(flat[0::2], flat[1::2]))
            # a count that is no whole number (text, inf, nan, 1e300: no minitask wrote
            # it) is read as none, and a group whose score is none is left out (said once
            # in the log): one planted entry never hides the queue's other counts
            counter = None if not ready else whole(
                ready, 0, _MOST)
            grouped = counter or 0
            largest_groups = []
            for member, score in top:
                backlog = whole(score, 0, _MOST)
                if backlog is None:
                    ignored(keys[index].groups, f"the score of group {shown_member(member)} "
                                                f"is no count of ready tasks")
                    continue
                largest_groups.append((_group_shown(member), backlog))
            # the counter gone (deleted, or not minitask's): the backlogs read are ready
            # all the same, and all of them when every group was read. A counter that is
            # there is the scripts' own, exact: it outweighs scores a planted entry holds
            read = sum(backlog for _, backlog in largest_groups)
            if counter is None and read:
                ignored(keys[index].groups_ready,
                        f"it holds no count of grouped ready tasks; its groups "
                        f"{'hold' if int(count) <= largest else 'hold at least'} {read}")
                grouped = read
            # a solo group of a plain task (groups_solo) holds one ready task, counted by
            # its token in a ready list (so in the queue's ready count already: ``solo``)
            solo = int(solo)
            largest_groups += [(_group_shown(name), 1) for name in solo_names]
            if grouped or count or solo:
                found[queue] = {"grouped": grouped + solo, "groups": int(count) + solo,
                                "largest_groups": largest_groups, "solo": solo}
        return found

    def paused_many(self, queues: Sequence[str], shown: int = 10) -> Dict[str, Any]:
        """Per queue with paused groups (fair queues): ``paused_groups`` (how many) and
        ``paused_shown`` (at most ``shown`` of them, by name: those a scan's first step
        finds, sorted), each with its ready tasks. One round trip whatever the number of
        queues or of paused groups (paused_page.lua: a SCARD, a bounded SSCAN, a ZSCORE
        of each name read; a name longer than any group's is removed, never sent)."""
        keys = [queue_keys(self.app_name, queue) for queue in queues]
        replies = self.transport.run_calls(
            [("paused_page", queue, (k.groups_paused, k.groups, k.groups_solo),
              (shown, GROUP_BYTES), 0)
             for queue, k in zip(queues, keys)],
            f"read the paused groups of {len(keys)} queue(s)") if keys else []
        found: Dict[str, Any] = {}
        for queue, k, (count, flat, *removed) in zip(queues, keys, replies):
            if count is None:  # another type: data minitask did not write, none shown
                ignored(k.groups_paused, f"it holds another type ({text(flat)})")
                continue
            removed_members(k.groups_paused, removed[0], "group name")
            if not count:
                continue
            # (the scores of the names shown; one that is no count, or none: 0)
            named = sorted(zip(flat[0::2], flat[1::2]), key=lambda pair: pair[0])[:shown]
            found[queue] = {"paused_groups": int(count),
                            "paused_shown": [(_group_shown(name), whole(score, 0, _MOST) or 0)
                                             for name, score in named]}
        return found


def _group_shown(raw: bytes) -> str:
    """A group's name read from Redis, as the listings show it: a name that is no UTF-8
    (not minitask's: it checks every group) keeps its other bytes as \\xNN, not left out
    with its queue's counts; one longer than a group can be (planted: 500,000
    characters made ``minitask status`` 600 kB) cut (``shown_name``). The rest is data,
    as Redis holds it: the readers escape what they show (``printable``)."""
    return shown_name(raw.decode("utf-8", "backslashreplace"))


#: The longest count minitask writes in a counter (a 64-bit integer, sign included):
#: a longer value is measured and never read (``parked_many``, groups_top.lua).
COUNT_BYTES = 20

#: The largest count read back as one (a ready-task count, a backlog): more is planted.
_MOST = 2 ** 62
#: The longest group name minitask writes, in bytes (characters of up to 4 UTF-8 bytes):
#: a longer member of a queue's groups is removed unsent (groups_top.lua).
GROUP_BYTES = 4 * MAX_GROUP_LENGTH


def _paused_problem(key: str) -> str:
    """What is wrong with a set of paused groups of another type, and what to do."""
    return _foreign_problem(key, "the paused groups, a set")


def _foreign_problem(key: str, kept: str) -> str:
    """What is wrong with ``key``, which minitask keeps as ``kept`` ("the paused groups,
    a set") but holds another type, and what to do."""
    return (f"minitask key {key} ({kept}) holds another type: data minitask did not "
            f"write; inspect it with redis-cli, then delete it")
