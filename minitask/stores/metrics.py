"""MetricsStore: counters and histograms summed over all workers, and the
per-minute throughput of each queue.

Each worker counts in memory and adds what it counted since its last beat
with its heartbeat, one pipeline for all of it: no round trip per task. Every
field is a sum, so workers never overwrite each other, and a reader sees the
app as a whole without asking any worker. The hash has one field per
(queue, task, outcome) and per histogram bucket: its size depends on how many
tasks and queues there are, never on how many tasks ran.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field
from typing import (Any, DefaultDict, Dict, Iterable, Iterator, List, Optional, Sequence, Set,
                    Tuple)

from ..printable import printable
from .foreign import ignored, move_aside, raise_refusals, summarised, whole
from .store import Store


#: Histogram bucket upper bounds (seconds), Prometheus' defaults; +Inf is implied.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
INF = "+Inf"
#: Between the parts of a field name: a control character, which no queue or
#: task name may hold.
SEPARATOR = "\x1f"
#: Throughput minutes kept; the dashboard draws the last hour.
KEEP_MS = 2 * 3600 * 1000
MINUTE_MS = 60_000

#: Field kinds: outcome counters, and each histogram's buckets and sum.
TASKS = "tasks"            # queue, task, outcome
DURATION = "duration"      # task, le
DURATION_SUM = "duration_sum"  # task
PICKUP = "pickup"          # queue, le
PICKUP_SUM = "pickup_sum"  # queue
#: The task label of dead letters whose task no worker knows (its name is the
#: message's own text: one label for all, so series stay bounded).
UNKNOWN_TASK = "(unknown task)"
#: The outcomes a TASKS field counts.
OUTCOMES = ("succeeded", "failed", "retried", "dead")
#: Fields one HMGET asks at most (a read of many is several, in one round trip).
HMGET_FIELDS = 2000
#: The most bytes of a field's value a read takes (HSTRLEN first): minitask writes
#: numbers (a count, a sum of seconds), some 20 bytes; a longer value is not read.
VALUE_BYTES = 64
#: Fields a read that names none (``totals()``, ``throughput()`` without queues) takes at
#: most, by HSCAN: a hash anyone can fill never costs a read more than this.
SCANNED_FIELDS = 10_000


#: How Redis refuses an HINCRBY or HINCRBYFLOAT on a field holding no number, or one
#: that cannot grow (besides WRONGTYPE, a key of another type): data minitask did not
#: write, to be left as it is.
_FIELD_REFUSALS = ("hash value is not", "increment or decrement would overflow",
                   "increment would produce NaN or Infinity")


def _refused_data(reply: Any) -> bool:
    """Whether a pipeline reply is Redis refusing what a key or field holds."""
    return isinstance(reply, Exception) and (
        str(reply).startswith("WRONGTYPE") or any(words in str(reply)
                                                  for words in _FIELD_REFUSALS))


def name(kind: str, *labels: str) -> str:
    return SEPARATOR.join((kind, *labels))


#: Each bucket's label, made once, and +Inf's after them (twice a task on a worker's
#: hot path: found by bisection, in C, rather than a loop over the bounds).
_LABELS = tuple(repr(bound) for bound in BUCKETS) + (INF,)


def bucket_of(seconds: float) -> str:
    """The label of the smallest bucket holding ``seconds``."""
    return _LABELS[bisect_left(BUCKETS, seconds)]


@dataclass
class Delta:
    """What one worker counted since it last added its counts."""

    #: fields as (kind, *labels): joined into the hash's field names (``name``) only
    #: when added to Redis, not at each count on a worker's hot path
    #: (defaultdicts, C's own: a Counter's += costs a worker 1 % more per task)
    counts: DefaultDict[Tuple[str, ...], int] = field(default_factory=lambda: defaultdict(int))
    sums: DefaultDict[Tuple[str, ...], float] = field(default_factory=lambda: defaultdict(float))
    #: (Unix minute, queue) -> attempts ended
    minutes: DefaultDict[Tuple[int, str], int] = field(default_factory=lambda: defaultdict(int))

    def __bool__(self) -> bool:
        return bool(self.counts or self.sums or self.minutes)

    def merge(self, other: "Delta") -> None:
        for key, count in other.counts.items():
            self.counts[key] += count
        for key, total in other.sums.items():
            self.sums[key] += total
        for minute, count in other.minutes.items():
            self.minutes[minute] += count


class MetricsStore(Store):
    """The app-wide metrics hash and throughput series."""

    def add(self, delta: Delta) -> None:
        """Add one worker's counts to the app's, in one round trip.

        Each count is added once. A key of another type (no minitask wrote it) is moved
        aside whole and its counts added to a new one, so that no worker's counts are
        dropped for good; a field holding what Redis cannot add to (no number, or one
        at its limit) refuses its own commands, which are dropped and said once, while
        the others stand. Only a lost connection raises (then nothing is known to be
        added)."""
        wrong = self._add(delta, retried=False)
        if wrong:
            with self.transport.errors("set aside the metrics"):
                for key in wrong:
                    move_aside(self.transport.client, key, "hash")
            self._add(self._part(delta, wrong), retried=True)

    def _add(self, delta: Delta, retried: bool) -> Set[str]:
        """Send ``delta``'s counts; the keys of another type that refused them, when not
        ``retried`` (else those are said, as every other refusal of data)."""
        key = self.app_keys.metrics
        with self.transport.errors("add the worker's metrics"):
            pipe = self.transport.client.pipeline(transaction=False)
            touched: List[Tuple[str, str]] = []
            for labels, count in delta.counts.items():
                pipe.hincrby(key, name(*labels), count)
                touched.append((key, name(*labels)))
            for labels, total in delta.sums.items():
                pipe.hincrbyfloat(key, name(*labels), total)
                touched.append((key, name(*labels)))
            for (minute, queue), count in delta.minutes.items():
                series = self.app_keys.throughput(minute)
                pipe.hincrby(series, queue, count)
                pipe.pexpireat(series, minute * MINUTE_MS + KEEP_MS)
                touched += ((series, queue), (series, ""))
            replies = pipe.execute(raise_on_error=False)
            # a refusal of the data is no failure of Redis: raised, the counts Redis
            # did add would be kept for the next heartbeat and added again
            raise_refusals(reply for reply in replies if not _refused_data(reply))
        refused: Dict[str, str] = {}
        wrong: Set[str] = set()
        for (where, field_name), reply in zip(touched, replies):
            if not retried and str(reply).startswith("WRONGTYPE"):
                wrong.add(where)
            elif _refused_data(reply) and where not in refused:
                refused[where] = (f"counts not added: {reply}" if not field_name else
                                  f"field {printable(field_name)}: counts not added: {reply}")
        for where, problem in refused.items():
            ignored(where, problem)
        return wrong

    def _part(self, delta: Delta, keys: Set[str]) -> Delta:
        """The counts of ``delta`` that go to ``keys``."""
        part = Delta()
        if self.app_keys.metrics in keys:
            part.counts.update(delta.counts)
            part.sums.update(delta.sums)
        part.minutes.update((at, count) for at, count in delta.minutes.items()
                            if self.app_keys.throughput(at[0]) in keys)
        return part

    def totals(self, queues: Optional[Sequence[str]] = None,
               tasks: Optional[Sequence[str]] = None) -> Dict[Tuple[str, ...], float]:
        """Every counter, as (kind, *labels) -> value; what no minitask wrote (a key of
        another type, a value that is no finite number) is left out, said in the log.

        With ``queues`` and ``tasks`` (a scrape: those the app declares), only the
        fields minitask writes for them are read (HMGET): what the read costs depends on
        the app, never on other fields in the hash. Without, at most ``SCANNED_FIELDS``
        fields are read (HSCAN)."""
        key = self.app_keys.metrics
        if queues is None or tasks is None:
            found = self._scan(key, "read the metrics")
            if found is None:
                return {}
            pairs: Iterable[Tuple[Any, Any]] = found.items()
        else:
            names = list(fields(queues, tasks))
            replies = self._hmget(key, names, "read the metrics")
            if replies is None:
                return {}
            pairs = ((field_name, value) for field_name, value in zip(names, replies)
                     if value is not None)
        totals: Dict[Tuple[str, ...], float] = {}
        with summarised():
            for field_name, value in pairs:
                number = _finite(value)
                if number is None:
                    ignored(key, f"field {printable(field_name)!r} holds no finite number")
                    continue
                totals[tuple(_text(field_name).split(SEPARATOR))] = number
        return totals

    def throughput(self, now_ms: int, minutes: int = 60,
                   queues: Optional[Sequence[str]] = None) -> List[Tuple[int, Dict[str, int]]]:
        """(Unix minute, queue -> attempts ended) for the last ``minutes`` minutes, oldest
        first: of ``queues`` only when given (HMGET, one per minute, in one round
        trip), else at most ``SCANNED_FIELDS`` queues a minute (HSCAN). A minute's key
        of another type, or a count that is no whole number, is left out, said in the
        log."""
        last = now_ms // MINUTE_MS
        span = list(range(last - minutes + 1, last + 1))
        if queues is not None:
            asked = list(queues)
            replies = self._bounded([(self.app_keys.throughput(minute), asked)
                                     for minute in span], "read the throughput")
            read: List[Any] = [reply if isinstance(reply, Exception) else
                               dict(zip(asked, reply)) for reply in replies]
        else:
            read = [self._scan(self.app_keys.throughput(minute), "read the throughput",
                               refusal=True) for minute in span]
        series = []
        with summarised():
            for minute, reply in zip(span, read):
                counts: Dict[str, int] = {}
                if isinstance(reply, Exception):
                    ignored(self.app_keys.throughput(minute), f"it holds another type than "
                                                              f"a hash ({reply})")
                    reply = {}
                for queue, count in (reply or {}).items():
                    if count is None:
                        continue
                    number = whole(count, 0, 2 ** 62)
                    if number is None:
                        ignored(self.app_keys.throughput(minute),
                                f"the count of {printable(queue)!r} is no whole number")
                        continue
                    counts[_text(queue)] = number
                series.append((minute, counts))
        return series

    def _hmget(self, key: str, names: List[str], what: str) -> Optional[List[Any]]:
        """The values of ``names`` in hash ``key`` (None for a field not there, or too
        long: ``_bounded``), in two round trips; None when the key holds another type
        (said in the log)."""
        (reply,) = self._bounded([(key, names)], what)
        if isinstance(reply, Exception):
            ignored(key, f"it holds another type than a hash ({reply})")
            return None
        values: List[Any] = reply
        return values

    def _bounded(self, asked: Sequence[Tuple[str, List[str]]], what: str) -> List[Any]:
        """For each (hash, fields) asked, the fields' values in order, or Redis's refusal
        of a key of another type. Lengths first (HSTRLEN), then only the fields no longer
        than ``VALUE_BYTES`` (HMGET): a longer one (no minitask wrote it: a 20 MB field
        cost every scrape 20 MB) is None, said in the log naming the key; two round
        trips whatever the number of hashes."""
        client = self.transport.client
        with self.transport.errors(what):
            pipe = client.pipeline(transaction=False)
            for key, names in asked:
                for field_name in names:
                    pipe.hstrlen(key, field_name)
            sizes = iter(pipe.execute(raise_on_error=False)
                         if any(names for _, names in asked) else [])
            results: List[Any] = []
            wanted: List[List[str]] = []
            pipe = client.pipeline(transaction=False)
            with summarised():
                for key, names in asked:
                    lengths = [next(sizes) for _ in names]
                    refused = next((n for n in lengths if isinstance(n, Exception)), None)
                    if refused is not None:
                        raise_refusals([refused])
                        results.append(refused)
                        wanted.append([])
                        continue
                    for field_name, size in zip(names, lengths):
                        if size > VALUE_BYTES:
                            ignored(key, f"field {printable(field_name)!r} is {size} bytes "
                                         f"long, more than minitask writes ({VALUE_BYTES}): "
                                         f"not read")
                    read = [n for n, size in zip(names, lengths) if 0 < size <= VALUE_BYTES]
                    for start in range(0, len(read), HMGET_FIELDS):
                        pipe.hmget(key, read[start:start + HMGET_FIELDS])
                    results.append(None)
                    wanted.append(read)
            replies = iter(pipe.execute(raise_on_error=False)
                           if any(wanted) else [])
            for index, ((key, names), read) in enumerate(zip(asked, wanted)):
                if results[index] is not None:
                    continue
                values: Dict[str, Any] = {}
                for start in range(0, len(read), HMGET_FIELDS):
                    reply = next(replies)
                    raise_refusals([reply])
                    if isinstance(reply, Exception):
                        results[index] = reply
                        break
                    values.update(zip(read[start:start + HMGET_FIELDS], reply))
                if results[index] is None:
                    results[index] = [values.get(n) for n in names]
        return results

    def _scan(self, key: str, what: str, refusal: bool = False) -> Any:
        """At most ``SCANNED_FIELDS`` fields of hash ``key`` (HSCAN); None when it holds
        another type (said in the log), or with ``refusal`` the refusal itself."""
        found: Dict[Any, Any] = {}
        cursor: Any = 0
        with self.transport.errors(what):
            while True:
                pipe = self.transport.client.pipeline(transaction=False)
                pipe.hscan(key, cursor, count=1000)
                (reply,) = pipe.execute(raise_on_error=False)
                raise_refusals([reply])
                if isinstance(reply, Exception):
                    if refusal:
                        return reply
                    ignored(key, f"it holds another type than a hash ({reply})")
                    return None
                cursor, page = reply
                found.update(page)
                if int(cursor) == 0 or len(found) >= SCANNED_FIELDS:
                    return found


def fields(queues: Sequence[str], tasks: Sequence[str]) -> Iterator[str]:
    """The names of every field minitask writes for ``queues`` and ``tasks``."""
    labels = _LABELS
    for queue in queues:
        for task in tasks:
            for outcome in OUTCOMES:
                yield name(TASKS, queue, task, outcome)
        for label in labels:
            yield name(PICKUP, queue, label)
        yield name(PICKUP_SUM, queue)
    for task in tasks:
        for label in labels:
            yield name(DURATION, task, label)
        yield name(DURATION_SUM, task)


def _finite(value: object) -> Optional[float]:
    """A counter's value as a finite float, or None (nan, inf, text: no minitask wrote it)."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _text(value: object) -> str:
    """A field name as str; bytes that are not UTF-8 (no minitask wrote them) escaped."""
    return value.decode(errors="backslashreplace") if isinstance(value, bytes) else str(value)
