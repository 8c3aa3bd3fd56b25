"""/metrics labels come from the queues the app knows, never from a message's own
fields: planted messages add no series."""
from __future__ import annotations

import dataclasses
import io
from typing import Any, Callable, Dict, List, Set, Tuple

from prometheus_client.parser import text_string_to_metric_families

from minitask import Minitask, current_task
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard
from minitask.wire.serializer import decode_message, encode_message


def _drain_and_beat(app: Minitask) -> None:
    worker = app.worker()
    for _ in range(100):
        if not worker.run_once():
            worker.beat()  # its metrics reach Redis with the heartbeat
            return
    raise AssertionError("the worker never ran out of tasks")


def _labels(app: Minitask) -> Dict[str, Set[Tuple[Tuple[str, str], ...]]]:
    environ: Dict[str, Any] = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics",
                               "QUERY_STRING": "", "wsgi.input": io.BytesIO(b""),
                               "HTTP_HOST": "127.0.0.1:5555"}
    body = b"".join(Dashboard(app)(environ, lambda status, headers: None)).decode()
    found: Dict[str, Set[Tuple[Tuple[str, str], ...]]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found.setdefault(family.name, set()).add(tuple(sorted(sample.labels.items())))
    return found


def test_planted_messages_label_metrics_with_the_queue_they_came_from(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")
    seen: List[str] = []

    @app.task
    def work(n: int) -> int:
        context = current_task()
        assert context is not None
        seen.append(context.queue)
        return n

    client = app.broker.client
    messages = queue_keys("shop", "default").messages
    for n in range(5):
        handle = work.delay(n)
        message = decode_message(client.hget(messages, handle.id))
        planted = dataclasses.replace(message, queue=f"planted-queue-{n}")
        if n % 2:  # and a task name no worker knows
            planted = dataclasses.replace(planted, task=f"planted.task.{n}")
        client.hset(messages, handle.id, encode_message(planted))
    _drain_and_beat(app)
    assert seen == ["default"] * 3  # the task's context names the queue it came from
    labels = _labels(app)
    queues = {dict(series).get("queue") for name, all_series in labels.items()
              for series in all_series} - {None}
    tasks = {dict(series).get("task") for name, all_series in labels.items()
             for series in all_series} - {None}
    assert queues == {"default"}
    assert not any(task.startswith("planted") for task in tasks)
