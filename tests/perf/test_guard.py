"""The instruction-count guard: its verdicts, and proof that it fails on a script made
slower (a loop planted in a copy of enqueue.lua), under real callgrind."""
from __future__ import annotations

from typing import Iterator

import pytest

from minitask.stores import scripts
from tests.perf.guard import Measured, check, compare, measure, read_record, table


def test_a_count_over_five_percent_fails_and_one_under_passes() -> None:
    recorded = {"fetch": 100_000, "ack": 50_000}
    verdicts = compare(recorded, {"fetch": 105_000, "ack": 52_600})
    assert [v.failed for v in verdicts] == [False, True]
    text = table(verdicts, {})
    assert "+5.2%" in text and "FAIL: over 5%" in text


def test_an_operation_missing_from_either_side_fails() -> None:
    verdicts = compare({"fetch": 100, "gone": 100}, {"fetch": 100, "new": 100})
    assert {v.name: v.failed for v in verdicts} == {"fetch": False, "new": True, "gone": True}
    assert "not recorded" in verdicts[1].says and "no longer measured" in verdicts[2].says


def test_counts_of_another_redis_version_fail() -> None:
    passed, text = check(Measured("7.0.15", {"fetch": 100}, {}),
                         Measured("7.2.4", {"fetch": 100}, {}))
    assert not passed and "recorded on Redis 7.0.15, this is 7.2.4" in text


@pytest.fixture
def slower_enqueue(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """enqueue.lua with a loop planted in front: about 30 % more instructions for a
    delayed task, well past 5 % whatever the spread of two runs (2 % at most seen)."""
    read = scripts._read

    def planted(name: str) -> str:
        text = read(name)
        return "for _ = 1, 1000 do end\n" + text if name == "enqueue" else text

    scripts.source.cache_clear()
    monkeypatch.setattr(scripts, "_read", planted)
    yield
    monkeypatch.undo()
    scripts.source.cache_clear()


def test_a_slower_script_fails_the_guard(slower_enqueue: None) -> None:
    recorded = read_record()
    found = measure(["delay_later"])
    passed, text = check(Measured(recorded.redis_version,
                                  {"delay_later": recorded.counts["delay_later"]},
                                  recorded.what), found)
    assert not passed, text
    assert "FAIL: delay_later: over the recorded" in text
    assert found.counts["delay_later"] > recorded.counts["delay_later"] * 1.05
