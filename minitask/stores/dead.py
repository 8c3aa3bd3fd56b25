"""DeadLetterStore: tasks that will not run again, kept with why; requeue and purge."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import ConfigurationError
from ..printable import printable
from ..wire.message import MAX_ID_BYTES, MAX_MS, MAX_SECONDS
from .bounds import bounded_page, read_fields, too_large, value_or_note
from .foreign import ignored, raise_refusals, removed_members, time_in, whole
from .queue import BATCH_LIMIT
from .store import Store

_SCRIPTS = ("revive", "purge_dead", "dead_heads", "hash_fields", "members_page")

#: The most dead letters a queue keeps by default (``dead_letters_max``): Sidekiq's.
DEFAULT_DEAD_MAX = 10_000
#: Seconds a dead letter is kept by default (``dead_letters_ttl``): 180 days.
DEFAULT_DEAD_TTL = 180 * 86400.0
#: The largest ``dead_letters_max`` taken (a timestamp or byte count given by mistake).
MOST_DEAD_MAX = 100_000_000
#: Dead letters one dead-lettering deletes at most (bury.lua): a lowered bound is
#: reached over the next ones, no script runs long.
TRIM_MOST = 100
#: Digits of the count of deleted dead letters read at most (a planted long value
#: is read as none).
_COUNT_BYTES = 20


@dataclass(frozen=True)
class Buried:
    """What a dead-lettering did (``ResultStore.bury``): true when the task is dead
    now, with how many of its queue's oldest dead letters the bounds deleted."""

    done: bool
    deleted: int = 0

    def __bool__(self) -> bool:
        return self.done


@dataclass(frozen=True)
class DeadBounds:
    """How many dead letters each queue of an app keeps (``dead_letters_max``) and
    for how many seconds (``dead_letters_ttl``; None: no age limit)."""

    most: int = DEFAULT_DEAD_MAX
    ttl: Optional[float] = DEFAULT_DEAD_TTL

    @property
    def ttl_ms(self) -> int:
        """The ttl as bury.lua takes it: whole milliseconds, at least 1; 0: none."""
        return 0 if self.ttl is None else max(1, round(self.ttl * 1000))


def dead_letter_bounds(options: Mapping[str, Any], where: str) -> DeadBounds:
    """An app's ``dead_letters_max`` and ``dead_letters_ttl`` (``options``), checked: an
    int from 1 to MOST_DEAD_MAX, and seconds above 0 (at most MAX_SECONDS) or None."""
    most = options.get("dead_letters_max", DEFAULT_DEAD_MAX)
    ttl = options.get("dead_letters_ttl", DEFAULT_DEAD_TTL)
    if type(most) is not int or not 1 <= most <= MOST_DEAD_MAX:
        raise ConfigurationError(f"{where}: dead_letters_max must be an int from 1 to "
                                 f"{MOST_DEAD_MAX:,} (the most dead letters each queue "
                                 f"keeps; the oldest go first), got {most!r:.80}")
    if ttl is not None and (type(ttl) not in (int, float) or not 0 < ttl <= MAX_SECONDS):
        raise ConfigurationError(f"{where}: dead_letters_ttl must be a number of seconds "
                                 f"above 0, at most {MAX_SECONDS} (100 years), or None for "
                                 f"no age limit, got {ttl!r:.80}")
    return DeadBounds(most, None if ttl is None else float(ttl))


@dataclass(frozen=True)
class DeadLetter:
    task_id: str
    queue: str
    dead_at_ms: int
    body: Optional[bytes]
    info: Optional[bytes]
    unreadable: str = ""  # why dead_at_ms (then clamped) is not the time it died
    #: why Redis holds no record minitask can read where it keeps one ('': none is
    #: missing for that reason): its dead_info key is of another type, or the record
    #: is longer than minitask writes (not read)
    record_problem: str = ""
    #: why its message is not read: longer than minitask writes ('' when it is read)
    body_too_large: str = ""


@dataclass(frozen=True)
class DeadHead:
    """A dead letter as a listing reads it (``DeadLetterStore.heads``): the first
    bytes of its message and of its dead-letter record, and their whole lengths
    (-1: Redis holds none; -2: the key that holds them is of another type, said in
    ``record_problem`` for the record)."""

    task_id: str
    queue: str
    dead_at_ms: int
    body: bytes
    body_length: int
    info: bytes
    info_length: int
    unreadable: str = ""
    record_problem: str = ""
    #: why its message is not read: longer than minitask writes ('' when it is read)
    body_too_large: str = ""


def _time_ms(score: float) -> int:
    """A dead letter's score as a time (ms) that a datetime can hold: one that is
    no time (inf, -inf, beyond the year 9999; no minitask wrote it) is clamped."""
    if math.isnan(score):
        return 0
    return int(min(max(score, 0.0), float(MAX_MS)))


def _other_type(key: str) -> str:
    """Why nothing can be read in ``key`` (a dead letter's messages or records: it is
    of another type), said once in the log."""
    ignored(key, "it holds another type than a hash")
    return f"key {key} holds another type than a hash (no minitask wrote it)"


def _no_time(key: str, score: float) -> str:
    """What is wrong with a dead letter's score ('' when it is a time minitask writes)."""
    return time_in(key, score, "time of death")[1]


#: Queues whose dead letters are counted in one round trip.
HOLDING_BATCH = 1000


class DeadLetterStore(Store):
    """The dead letters of one app's queues."""

    scripts = _SCRIPTS

    def letters(self, queue: str, limit: int) -> List[DeadLetter]:
        """The oldest ``limit`` dead letters of ``queue``, with message and reason."""
        k = self.keys(queue)
        # a key of another type (no minitask wrote it) is read as empty, never an
        # error: one queue's foreign key hides no letter, nor another queue's; a member
        # longer than any id is removed unsent (members_page.lua)
        entries: List[Tuple[bytes, float]] = bounded_page(
            self.transport, k.dead, 0, limit - 1, True, MAX_ID_BYTES,
            f"list dead letters of queue {queue!r}")
        if not entries:
            return []
        raw = [task_id for task_id, _ in entries]
        bodies, _, large = self._values(k.messages, raw, self.bounds.message)
        infos, problem, large_infos = self._values(k.dead_info, raw, self.bounds.outcome, True)
        # an id that is not UTF-8 (no minitask wrote it) is shown escaped
        return [DeadLetter(task_id.decode(errors="backslashreplace"), queue, _time_ms(score),
                           body, info, _no_time(k.dead, score), problem or large_info,
                           large_body)
                for (task_id, score), body, info, large_body, large_info
                in zip(entries, bodies, infos, large, large_infos)]

    def _values(self, key: str, fields: Sequence[bytes], most: int,
                records: bool = False) -> Tuple[List[Optional[bytes]], str, List[str]]:
        """The values of ``fields`` of ``key``, each read only when no longer than
        ``most`` (hash_fields.lua, one round trip): the values (None: none, or not
        read), why none is read when ``key`` is of another type, and why each is not
        read when too large ('': read; ``records``: its length last, as a dead
        letter's unreadable record says it)."""
        found = read_fields(self.transport, [(key, field, most) for field in fields],
                            f"read dead letters in key {printable(key)}")
        if any(isinstance(value, Exception) for value in found):
            return [None] * len(fields), _other_type(key), [""] * len(fields)
        read = [value_or_note(key, field, value, most, length_last=records)
                for field, value in zip(fields, found)]
        return [value for value, _ in read], "", [why for _, why in read]

    def heads(self, queue: str, limit: int, most: int) -> List[DeadHead]:
        """The oldest ``limit`` dead letters of ``queue``, with at most the first
        ``most`` bytes of each message and record, in one round trip (dead_heads.lua)."""
        k = self.keys(queue)
        bounds = self.bounds
        listed, bodies, body_lengths, infos, info_lengths, *removed = self.transport.run(
            "dead_heads", (k.dead, k.messages, k.dead_info),
            (max(1, limit), most, bounds.message, bounds.outcome, MAX_ID_BYTES),
            f"list dead letters of queue {queue!r}")
        removed_members(k.dead, removed[0] if removed else ())
        found = []
        for index, task_id in enumerate(listed[0::2]):
            score = float(listed[2 * index + 1])
            body_length, info_length = int(body_lengths[index]), int(info_lengths[index])
            # None: longer than minitask writes, measured and not read
            body, info = bodies[index], infos[index]
            problem = (_other_type(k.dead_info) if info_length == -2 else too_large(
                k.dead_info, task_id, info_length, bounds.outcome, length_last=True)
                if info is None else "")
            found.append(DeadHead(task_id.decode(errors="backslashreplace"), queue,
                                  _time_ms(score), body or b"", body_length,
                                  info or b"", info_length, _no_time(k.dead, score), problem,
                                  too_large(k.messages, task_id, body_length, bounds.message)
                                  if body is None else ""))
        return found

    def holding(self, queues: Sequence[str]) -> List[str]:
        """Those of ``queues`` that hold dead letters, in order, a round trip per
        ``HOLDING_BATCH`` queues (a dead set of another type holds none)."""
        return list(self.sizes(queues))

    def sizes(self, queues: Sequence[str]) -> Dict[str, int]:
        """How many dead letters each of ``queues`` that holds any holds, in order, a
        round trip per ``HOLDING_BATCH`` queues (a dead set of another type holds none)."""
        found: Dict[str, int] = {}
        for start in range(0, len(queues), HOLDING_BATCH):
            batch = queues[start:start + HOLDING_BATCH]
            with self.transport.errors(f"count dead letters of {len(batch)} queue(s)"):
                pipe = self.transport.client.pipeline(transaction=False)
                for queue in batch:
                    pipe.zcard(self.keys(queue).dead)
                replies = pipe.execute(raise_on_error=False)
                raise_refusals(replies)
            found.update((queue, size) for queue, size in zip(batch, replies)
                         if isinstance(size, int) and size > 0)
        return found

    def ids(self, queue: str, limit: int, start: int = 0) -> List[bytes]:
        """The ids of the oldest ``limit`` dead letters after the first ``start``, as
        Redis holds them (one that is not UTF-8, which no minitask wrote, is purged all
        the same)."""
        key = self.keys(queue).dead
        # (a member longer than any id is removed unsent: members_page.lua)
        return bounded_page(self.transport, key, start, start + limit - 1, False, MAX_ID_BYTES,
                            f"list dead letters of queue {queue!r} (key {printable(key)})",
                            strict=True)

    def find(self, queues: Sequence[str],
             forms: Sequence[bytes]) -> Optional[Tuple[str, bytes]]:
        """The queue and the id, as Redis holds it, of the first of ``forms`` that is a
        dead letter of one of ``queues`` (a dead set of another type holds none)."""
        asked = [(form, queue) for form in forms for queue in queues]
        if not asked:
            return None
        with self.transport.errors("find a dead letter"):
            pipe = self.transport.client.pipeline(transaction=False)
            for form, queue in asked:
                pipe.zscore(self.keys(queue).dead, form)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        for (form, queue), score in zip(asked, replies):
            if score is not None and not isinstance(score, Exception):
                return queue, form
        return None

    def letter(self, queue: str, task_id: bytes) -> Optional[DeadLetter]:
        """One dead letter of ``queue`` by its id as Redis holds it, or None."""
        k = self.keys(queue)
        with self.transport.errors(f"read dead letter {printable(task_id)} of queue {queue!r}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zscore(k.dead, task_id)
            score = pipe.execute(raise_on_error=False)[0]
            raise_refusals([score])
        if score is None or isinstance(score, Exception):  # another type holds none
            return None
        bodies, _, large = self._values(k.messages, [task_id], self.bounds.message)
        infos, problem, large_info = self._values(
            k.dead_info, [task_id], self.bounds.outcome, True)
        return DeadLetter(task_id.decode(errors="backslashreplace"), queue, _time_ms(score),
                          bodies[0], infos[0], _no_time(k.dead, score),
                          problem or large_info[0], large[0])

    def revive(self, queue: str, task_id: str, body: bytes, priority: int, now_ms: int) -> int:
        """Put a dead task at the tail of its queue, behind every task due by ``now_ms``:
        1 done, 0 no dead letter has the id, -1 its message is gone (nothing written)."""
        k = self.keys(queue)
        done = self.transport.run(
            "revive", (k.dead, k.dead_info, k.messages, k.wake, k.result(task_id), *k.ready,
                       k.delayed, k.order, k.flow, k.flow_dead),
            (task_id, body, priority, now_ms, BATCH_LIMIT), f"requeue dead task {task_id}")
        return int(done)

    def purge(self, queue: str, task_ids: Sequence[Union[str, bytes]]) -> int:
        if not task_ids:
            return 0
        k = self.keys(queue)
        return int(self.transport.run("purge_dead", (k.dead, k.dead_info, k.messages, k.flow_dead),
                                      task_ids,
                                      f"purge dead letters of queue {queue!r}"))

    def trimmed_many(self, queues: Sequence[str]) -> Dict[str, int]:
        """How many dead letters of each queue its bounds deleted (``dead_letters_max``,
        ``dead_letters_ttl``; bury.lua counts them), in one round trip: each count
        measured (STRLEN) and only its first digits read, one no minitask wrote read
        as none (said once)."""
        keys = [self.keys(queue).dead_trimmed for queue in queues]
        with self.transport.errors(f"count the deleted dead letters of {len(keys)} queue(s)"):
            pipe = self.transport.client.pipeline(transaction=False)
            for key in keys:
                pipe.strlen(key)
                pipe.getrange(key, 0, _COUNT_BYTES - 1)
            replies = pipe.execute(raise_on_error=False)
        found = {}
        for index, (queue, key) in enumerate(zip(queues, keys)):
            length, count = replies[2 * index:2 * index + 2]
            if isinstance(length, int) and length > _COUNT_BYTES:
                ignored(key, f"it holds a value of {length:,} bytes, longer than any count "
                             f"minitask writes; read as no count")
                count = None
            found[queue] = whole(count, 0, 2 ** 63 - 1) or 0
        return found
