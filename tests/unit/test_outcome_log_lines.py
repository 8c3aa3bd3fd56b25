"""The worker's own lines about an outcome name their task in JSON logs too: the
success, retry, dead and cancel lines are logged outside the task's context, and
a log store must still be able to filter them by task id."""
from __future__ import annotations

import io
import json
import logging
from typing import Any, Dict, Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.cli.logs import handler


@pytest.fixture
def app(fake_redis: "redis.Redis[bytes]", clock: Any) -> Iterator[Minitask]:
    app = Minitask("lines", broker=fake_redis, clock=clock)
    yield app
    app.close()


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """What the ``minitask`` loggers write through the CLI's JSON handler."""
    stream = io.StringIO()
    json_handler = handler("json")
    json_handler.setStream(stream)  # type: ignore[attr-defined]
    logger = logging.getLogger("minitask")
    logger.addHandler(json_handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(json_handler)
        logger.setLevel(old_level)


def lines(stream: io.StringIO) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line]


def about(stream: io.StringIO, word: str) -> Dict[str, Any]:
    found = [entry for entry in lines(stream) if word in entry["message"]]
    assert len(found) == 1, lines(stream)
    return found[0]


def test_the_success_line_carries_the_task_id_and_name(app: Minitask,
                                                       json_log: io.StringIO) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    handle = add.delay(1, 2)
    app.worker(burst=True).run()
    entry = about(json_log, "succeeded")
    assert entry["task_id"] == handle.id and entry["task_name"] == add.name


def test_the_retry_and_dead_lines_carry_the_task_id_and_name(app: Minitask,
                                                             json_log: io.StringIO) -> None:
    @app.task(retries=1, retry_backoff=0.001)
    def flaky() -> None:
        raise ConnectionError("mail server busy")

    handle = flaky.delay()
    app.worker(burst=True).run()
    app.clock.advance(1.0)  # type: ignore[attr-defined]
    app.worker(burst=True).run()
    retry, dead = about(json_log, "failed on attempt"), about(json_log, "is dead")
    for entry in (retry, dead):
        assert entry["task_id"] == handle.id and entry["task_name"] == flaky.name
    assert f"minitask dead show -A APP {handle.id}" in dead["message"]


def test_the_text_format_escapes_what_came_from_redis() -> None:
    stream = io.StringIO()
    text_handler = handler("text")
    text_handler.setStream(stream)  # type: ignore[attr-defined]
    logger = logging.getLogger("minitask.test.forgery")
    logger.addHandler(text_handler)
    logger.propagate = False
    try:
        logger.error("task %s is dead", "x\n2026-01-01 00:00:00 INFO forged line\x1b[2J")
    finally:
        logger.removeHandler(text_handler)
    written = stream.getvalue()
    assert written.count("\n") == 1 and "\x1b" not in written
    assert "x\\x0a2026-01-01 00:00:00 INFO forged line\\x1b[2J" in written
