"""AdminStore: what operators do to a queue beyond its hot path: purge what is
ready, and read one task's record (deliveries, last failure, why it died).

Kept apart from the queue and results stores so that the steps the worker
runs thousands of times a second stay in modules that do nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

from .bounds import bounded_page, read_fields, too_large, value_or_note
from ..wire.message import MAX_ID_BYTES
from .foreign import (ignored, raise_refusals, removed_members, shown_member, text_of,
                      time_in, whole)
from .store import Store

_SCRIPTS = ("purge_ready", "peek", "hash_fields", "members_page")

#: Ready-list entries one purge script call takes at most, so Redis stays responsive.
PURGE_BATCH = 1000
#: Tasks one peek reads at most (peek.lua): a page; longer listings read page by page.
PEEK_MOST = 1000
#: Scheduled tasks ``next_due_ms`` reads at most, for the first one due at a time.
DUE_READ = 10
#: What the score of a task in each sorted set is, as an unreadable one is named.
_WHAT = {"leases": "lease deadline", "delayed": "due time"}


@dataclass(frozen=True)
class Peeked:
    """A task at the front of a queue's leases or delayed set (``AdminStore.peek``)."""

    task_id: str
    at_ms: Optional[int]           # its lease deadline or due time (None: unreadable)
    body: Optional[bytes]          # its message, if still there
    deliveries: int                # hand-overs of the current attempt not ended yet
    unreadable: str = ""           # why at_ms is None though the set has a score
    too_large: str = ""            # why body is None though Redis holds one (not read)


@dataclass(frozen=True)
class TaskRecord:
    """What Redis holds about one task of a queue, read in one round trip."""

    body: Optional[bytes]          # the message, while queued, scheduled, running or dead
    deliveries: int                # hand-overs of the current attempt not ended yet
    retry_note: Optional[bytes]    # encoded outcome of the last failed attempt, if retrying
    dead_info: Optional[bytes]     # encoded outcome saying why it died, if dead
    due_ms: Optional[int]          # when a scheduled task is due
    lease_deadline_ms: Optional[int]  # when a running task's lease runs out
    unreadable: str = ""           # a due time or lease deadline that is no time, said
    foreign: Tuple[str, ...] = ()  # keys read that hold another type (no minitask wrote)
    #: values longer than minitask writes there, measured and not read: why, each
    too_large: Tuple[str, ...] = ()


class AdminStore(Store):
    """Operator actions on the queues of one app."""

    scripts = _SCRIPTS

    def purge_ready(self, queue: str) -> int:
        """Delete every ready task of ``queue`` (not scheduled, running or dead ones),
        those parked by their limits too, a batch per script call; returns how many
        were deleted."""
        k = self.keys(queue)
        deleted = 0
        while True:
            gone, taken = self.transport.run(
                "purge_ready", (k.leases, k.delayed, k.dead, k.messages, k.deliveries,
                                k.retrying, k.cancelled, k.order, *k.ready, k.flow,
                                k.flow_due, k.flow_limiters, k.flow_prefix, k.flow_parked),
                (PURGE_BATCH,), f"purge the ready tasks of queue {queue!r}")
            deleted += int(gone)
            if int(taken) < PURGE_BATCH:
                return deleted

    def peek(self, queue: str, which: str, count: int) -> Tuple[int, List[Peeked]]:
        """The first ``count`` (at most PEEK_MOST) tasks of ``queue``'s ``leases``
        (running: soonest lease deadline first) or ``delayed`` (scheduled: soonest due
        first), and how many that set holds, in one round trip (peek.lua)."""
        total, found, _, _ = self._page(queue, which, max(1, min(count, PEEK_MOST)), 0)
        return total, found

    def peek_pages(self, queue: str, which: str,
                   count: int) -> Iterator[Tuple[int, List[Peeked]]]:
        """The first ``count`` tasks of ``queue``'s ``leases`` or ``delayed``, as
        ``peek`` reads them, a page of at most PEEK_MOST per round trip: a long
        listing never holds more than one page of messages, nor makes Redis read more
        in one step. Each page comes with how many the set holds as it was read.

        The pages are read one after the other, not at once: a task added or removed
        meanwhile shifts the ranks, so one may be left out or come again (a caller
        keeps each id once)."""
        start, left = 0, max(1, count)
        while left > 0:
            asked = min(left, PEEK_MOST)
            total, found, kept, removed = self._page(queue, which, asked, start)
            yield total, found
            if kept + removed < asked:  # the set ends in this page
                return
            # the members removed (longer than any id) no longer take a rank
            start, left = start + kept, left - asked

    def _page(self, queue: str, which: str, count: int,
              start: int) -> Tuple[int, List[Peeked], int, int]:
        """One page of peek.lua from rank ``start``: the set's size, its tasks, and how
        many members it read that stay in the set and how many it removed."""
        k = self.keys(queue)
        key = k.leases if which == "leases" else k.delayed
        most = self.bounds.message
        total, listed, bodies, counts, *removed = self.transport.run(
            "peek", (key, k.messages, k.deliveries), (count, most, MAX_ID_BYTES, start),
            f"list the {which} of queue {queue!r}")
        gone = removed[0] if removed else ()
        removed_members(key, gone)
        found = []
        for index, member in enumerate(listed[0::2]):
            task_id = text_of(member)
            if not task_id:
                ignored(key, "a member is no task id")
                continue
            body = bodies[index] if index < len(bodies) else None
            delivered = counts[index] if index < len(counts) else None
            if isinstance(delivered, int):  # the length of one longer than a count
                ignored(k.deliveries, f"the delivery count of task {shown_member(task_id)} is "
                                      f"{delivered:,} bytes long, longer than any count "
                                      f"minitask writes; read as 0")
                delivered = None
            at_ms, unreadable = time_in(key, listed[2 * index + 1], _WHAT[which], 10)
            # an int: the length of a message longer than minitask writes (not read)
            large = too_large(k.messages, task_id, body, most) if isinstance(body, int) else ""
            found.append(Peeked(task_id, at_ms, body if isinstance(body, bytes) else None,
                                whole(delivered, 0, 2 ** 31) or 0, unreadable, large))
        return int(total), found, len(listed) // 2, len(gone or ())

    def record(self, queue: str, task_id: str) -> TaskRecord:
        """The message, delivery count, retry note, death record and times of a task,
        in two round trips (the measured fields, then the times); a value longer than
        minitask writes there is measured and not read (``TaskRecord.too_large`` says
        which)."""
        k = self.keys(queue)
        bounds = self.bounds
        hashes = ((k.messages, bounds.message), (k.deliveries, 64),
                  (k.retrying, bounds.outcome), (k.dead_info, bounds.outcome))
        replies = read_fields(self.transport, [(key, task_id, most) for key, most in hashes],
                              f"read task {task_id}")
        with self.transport.errors(f"read task {task_id}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zscore(k.delayed, task_id)
            pipe.zscore(k.leases, task_id)
            scores = pipe.execute(raise_on_error=False)
            raise_refusals(scores)
        keys = (k.messages, k.deliveries, k.retrying, k.dead_info, k.delayed, k.leases)
        replies += scores
        for where, reply in zip(keys, replies):
            if isinstance(reply, Exception):  # another type: no minitask wrote it
                ignored(where, f"it holds another type ({reply})")
        values, large = [], []
        for (where, most), reply in zip(hashes, replies):
            value, why = value_or_note(where, task_id, reply, most)
            values.append(value)
            if why:
                large.append(why)
        body, deliveries, note, info = values
        delayed, lease = (None if isinstance(reply, Exception) else reply for reply in scores)
        due_ms, due_unreadable = time_in(k.delayed, delayed, _WHAT["delayed"], 10)
        lease_ms, lease_unreadable = time_in(k.leases, lease, _WHAT["leases"], 10)
        foreign = tuple(where for where, reply in zip(keys, replies)
                        if isinstance(reply, Exception))
        return TaskRecord(body, whole(deliveries, 0, 2 ** 31) or 0, note, info,
                          due_ms, lease_ms, due_unreadable or lease_unreadable, foreign,
                          tuple(large))

    def next_due_ms(self, queue: str) -> Optional[int]:
        """When the earliest scheduled task of ``queue`` is due, if any is. A score that
        is no time minitask writes (read as ``time_in`` reads every stored time) is
        passed over: of the first ``DUE_READ`` entries, the first that is a time."""
        key = self.keys(queue).delayed
        # (a member longer than any id is removed unsent: members_page.lua)
        first = bounded_page(self.transport, key, 0, DUE_READ - 1, True, MAX_ID_BYTES,
                             f"read the schedule of queue {queue!r}", strict=True)
        for entry in first:
            score = entry[1] if isinstance(entry, (tuple, list)) else None
            due_ms, _ = time_in(key, score, _WHAT["delayed"], 10)
            if due_ms is not None:
                return due_ms
        return None
