"""What minitask says about data it did not write is bounded whatever the data: a
read of 50,000 foreign entries logs one line per key, the memory of what was said
stays ``SAID_PAIRS`` pairs, and a key gets at most ``KEY_LINES`` lines a window
(probe 9, M3: one scrape of 50,000 foreign fields logged 50,002 lines, and every
pair was kept for the life of the process)."""
from __future__ import annotations

import logging
from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.stores import foreign
from minitask.stores.foreign import KEY_LINES, SAID_PAIRS, ignored, summarised
from tests.support.foreign_said import said_afresh

KEY = "minitask:{shop}:metrics"


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the process said before this test is not this test's."""
    said_afresh(monkeypatch)


def _lines(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == "minitask.stores.foreign"]


def test_many_problems_of_one_key_say_a_bounded_number_of_lines_in_bounded_memory(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="minitask.stores.foreign"):
        for index in range(50_000):
            ignored(KEY, f"field 'junk{index}' holds no finite number")
    lines = _lines(caplog)
    assert len(lines) == KEY_LINES, len(lines)
    assert "junk0" in lines[0] and KEY in lines[0]
    assert len(foreign._SAID) <= SAID_PAIRS and len(foreign._KEYS) <= SAID_PAIRS


def test_the_lines_held_back_are_counted_in_the_keys_next_line(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    said_afresh(monkeypatch, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="minitask.stores.foreign"):
        for index in range(KEY_LINES + 7):
            ignored(KEY, f"problem {index}")
        now[0] += foreign.KEY_WINDOW_S
        ignored(KEY, "one more")
    lines = _lines(caplog)
    assert len(lines) == KEY_LINES + 1
    assert "one more" in lines[-1] and "7 more ignored in this key" in lines[-1], lines[-1]


def test_one_pair_is_said_once_while_remembered_and_again_once_forgotten(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    said_afresh(monkeypatch, lines=10 ** 9)
    with caplog.at_level(logging.WARNING, logger="minitask.stores.foreign"):
        ignored(KEY, "first")
        ignored(KEY, "first")
        assert len(_lines(caplog)) == 1
        for index in range(SAID_PAIRS):
            ignored(KEY, f"other {index}")
        ignored(KEY, "first")  # forgotten: the memory is SAID_PAIRS pairs, no more
    assert len(_lines(caplog)) == SAID_PAIRS + 2
    assert len(foreign._SAID) == SAID_PAIRS


def test_a_read_says_one_line_per_key_with_a_count_and_an_example(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="minitask.stores.foreign"):
        with summarised():
            for index in range(10_000):
                ignored(KEY, f"field 'junk{index}' holds no finite number")
            ignored("minitask:{shop}:queues", "'a b' is no queue name")
        with summarised():  # the next scrape: the same example, said already
            for index in range(10_000):
                ignored(KEY, f"field 'junk{index}' holds no finite number")
    lines = _lines(caplog)
    assert len(lines) == 2, lines
    assert "ignored 10,000 entries" in lines[0] and "junk0" in lines[0]
    assert "'a b' is no queue name" in lines[1]


def test_reading_50000_foreign_metrics_fields_logs_one_line(
        fake_redis: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    app = Minitask("shop", broker=fake_redis)
    pipe = fake_redis.pipeline(transaction=False)
    for start in range(0, 50_000, 5000):
        pipe.hset(KEY, mapping={f"junk{i}": "nan" for i in range(start, start + 5000)})
    pipe.execute()
    with caplog.at_level(logging.WARNING, logger="minitask.stores.foreign"):
        assert app.broker.metrics.totals() == {}
    assert len(_lines(caplog)) == 1, len(_lines(caplog))
