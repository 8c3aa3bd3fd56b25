"""``GET /metrics``: the app's metrics in the Prometheus text format.

Everything comes from Redis: the queue counts (LLEN, ZCARD), the live worker
registry, and the sums every worker adds with its heartbeat
(``stores/metrics.py``). One scrape of any dashboard sees the whole app; no
worker is scraped and no multiprocess directory is needed.
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Tuple

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily, Metric)
from prometheus_client.registry import Collector

from ..admin import all_queue_counts, worker_listing
from ..app import Minitask
from ..stores.foreign import summarised
from ..stores.metrics import (BUCKETS, DURATION, DURATION_SUM, INF, OUTCOMES, PICKUP,
                              PICKUP_SUM, TASKS, UNKNOWN_TASK)

#: The states ``minitask_queue_tasks`` counts.
STATES = ("ready", "scheduled", "running", "dead")


class AppCollector(Collector):
    """Reads one app's metrics from Redis at each scrape."""

    def __init__(self, app: Minitask) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        queues = GaugeMetricFamily("minitask_queue_tasks", "Tasks of a queue, by state",
                                   labels=["queue", "state"])
        groups = GaugeMetricFamily("minitask_queue_groups", "Groups of a fair queue that "
                                   "hold ready tasks (no label per group)", labels=["queue"])
        # only the queues the app declares: the registry holds any name anyone with
        # Redis access planted (20,000 of them made a scrape of 80,000 series, 12 s)
        known = self.app.worker_queues()
        # as the queue page and minitask status count: parked tasks are ready
        deleted = CounterMetricFamily("minitask_dead_letters_deleted", "Dead letters deleted, "
                                      "oldest first, past dead_letters_max or dead_letters_ttl",
                                      labels=["queue"])
        for queue, counts in all_queue_counts(self.app, known).items():
            for state in STATES:
                queues.add_metric([queue, state], counts[state])
            groups.add_metric([queue], counts.get("groups", 0))
            deleted.add_metric([queue], counts.get("dead_trimmed", 0))
        yield queues
        yield groups
        yield deleted
        # every live worker, those past the listing's cap (SHOWN_WORKERS) included
        listed = worker_listing(self.app)
        yield GaugeMetricFamily("minitask_workers", "Live workers of the app",
                                value=len(listed.live) + listed.past_limit)
        # series only of the queues and tasks the app declares: a label is never text
        # that data in Redis alone chose, and only their fields are read (HMGET), so
        # a scrape costs the same beside 10 foreign fields or 100,000
        totals = self.app.broker.metrics.totals(known, sorted(self.app.tasks) + [UNKNOWN_TASK])
        tasks = CounterMetricFamily("minitask_tasks", "Attempts and tasks by outcome: "
                                    "succeeded, failed (attempts that raised), retried, dead",
                                    labels=["queue", "task", "outcome"])
        seen: Dict[Tuple[str, str], Dict[str, float]] = {}
        for labels, value in totals.items():
            if labels[0] == TASKS and len(labels) == 4 and labels[3] in OUTCOMES:
                seen.setdefault((labels[1], labels[2]), {})[labels[3]] = value
        for (queue, task), counts in sorted(seen.items()):
            for outcome in OUTCOMES:  # all four per (queue, task) seen
                tasks.add_metric([queue, task, outcome], counts.get(outcome, 0.0))
        yield tasks
        yield histogram("minitask_task_duration_seconds", "Run time of attempts, by task",
                        "task", totals, DURATION, DURATION_SUM)
        yield histogram("minitask_pickup_latency_seconds", "Time from due to started, by queue",
                        "queue", totals, PICKUP, PICKUP_SUM)


def histogram(name: str, doc: str, label: str, totals: Dict[Tuple[str, ...], float],
              kind: str, sum_kind: str) -> HistogramMetricFamily:
    """A histogram from per-bucket counts (each bucket counts only its own range)."""
    family = HistogramMetricFamily(name, doc, labels=[label])
    per_bucket: Dict[str, Dict[str, float]] = {}
    for labels, value in totals.items():
        if labels[0] == kind and len(labels) == 3:
            per_bucket.setdefault(labels[1], {})[labels[2]] = value
    for owner, counts in sorted(per_bucket.items()):
        cumulative = 0.0
        buckets: List[Tuple[str, float]] = []
        for bound in BUCKETS:
            cumulative += counts.get(repr(bound), 0.0)
            buckets.append((repr(bound), cumulative))
        cumulative += counts.get(INF, 0.0)
        buckets.append((INF, cumulative))
        family.add_metric([owner], buckets, sum_value=totals.get((sum_kind, owner), 0.0))
    return family


def exposition(app: Minitask) -> bytes:
    """The text a scrape gets."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AppCollector(app))
    with summarised():  # what it ignores: one line a key, not one a field
        return generate_latest(registry)
