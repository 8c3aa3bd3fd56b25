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
from collections import defaultdict
from dataclasses import dataclass, field
from typing import DefaultDict, Dict, List, Optional, Tuple

from ..printable import printable
from .foreign import ignored, raise_refusals, whole
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


def name(kind: str, *labels: str) -> str:
    return SEPARATOR.join((kind, *labels))


#: Each bucket's bound with its label, made once (twice a task on a worker's hot path).
_LABELLED = tuple((bound, repr(bound)) for bound in BUCKETS)


def bucket_of(seconds: float) -> str:
    """The label of the smallest bucket holding ``seconds``."""
    for bound, label in _LABELLED:
        if seconds <= bound:
            return label
    return INF


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

        Each count is added once: a key of another type (no minitask wrote it)
        refuses its own commands, which are dropped and said once, while the others
        stand; only a lost connection raises (then nothing is known to be added).
        """
        key = self.app_keys.metrics
        with self.transport.errors("add the worker's metrics"):
            pipe = self.transport.client.pipeline(transaction=False)
            touched: List[str] = []
            for labels, count in delta.counts.items():
                pipe.hincrby(key, name(*labels), count)
                touched.append(key)
            for labels, total in delta.sums.items():
                pipe.hincrbyfloat(key, name(*labels), total)
                touched.append(key)
            for (minute, queue), count in delta.minutes.items():
                series = self.app_keys.throughput(minute)
                pipe.hincrby(series, queue, count)
                pipe.pexpireat(series, minute * MINUTE_MS + KEEP_MS)
                touched += (series, series)
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        for refused in {where: reply for where, reply in zip(touched, replies)
                        if isinstance(reply, Exception)}.items():
            ignored(refused[0], f"counts not added: {refused[1]}")

    def totals(self) -> Dict[Tuple[str, ...], float]:
        """Every counter, as (kind, *labels) -> value; what no minitask wrote (a key of
        another type, a value that is no finite number) is left out, said once."""
        key = self.app_keys.metrics
        with self.transport.errors("read the metrics"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.hgetall(key)
            (raw,) = pipe.execute(raise_on_error=False)
            raise_refusals([raw])
        if isinstance(raw, Exception):
            ignored(key, f"it holds another type than a hash ({raw})")
            return {}
        found: Dict[Tuple[str, ...], float] = {}
        for field_name, value in raw.items():
            number = _finite(value)
            if number is None:
                ignored(key, f"field {printable(field_name)!r} holds no finite number")
                continue
            found[tuple(_text(field_name).split(SEPARATOR))] = number
        return found

    def throughput(self, now_ms: int, minutes: int = 60) -> List[Tuple[int, Dict[str, int]]]:
        """(Unix minute, queue -> attempts ended) for the last ``minutes`` minutes, oldest
        first; one hash read per minute, in one round trip. A minute's key of another
        type, or a count that is no whole number, is left out, said once."""
        last = now_ms // MINUTE_MS
        span = list(range(last - minutes + 1, last + 1))
        with self.transport.errors("read the throughput"):
            pipe = self.transport.client.pipeline(transaction=False)
            for minute in span:
                pipe.hgetall(self.app_keys.throughput(minute))
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
        series = []
        for minute, reply in zip(span, replies):
            counts: Dict[str, int] = {}
            if isinstance(reply, Exception):
                ignored(self.app_keys.throughput(minute), f"it holds another type than a "
                                                          f"hash ({reply})")
                reply = {}
            for queue, count in reply.items():
                number = whole(count, 0, 2 ** 62)
                if number is None:
                    ignored(self.app_keys.throughput(minute),
                            f"the count of {printable(queue)!r} is no whole number")
                    continue
                counts[_text(queue)] = number
            series.append((minute, counts))
        return series


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
