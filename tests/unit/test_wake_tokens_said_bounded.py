"""What an idle worker's BLPOP took off a wake list: a token says nothing; any other
element is said by its key (escaped) and length, never its content, once a minute a
key at most, the rest counted into the next line (issue 29)."""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import List

import pytest

from minitask.broker import wake_tokens


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wake_tokens, "_SAID", OrderedDict())


def lines(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.name == "minitask.broker.wake_tokens"]


def test_tokens_and_timeouts_say_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    wake_tokens.taken(None)
    wake_tokens.taken([b"minitask:{a:q}:wake", b"1"])
    assert lines(caplog) == []


def test_a_planted_element_is_said_by_length_once_a_minute_a_key(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.WARNING)
    now = [1000.0]
    monkeypatch.setattr(wake_tokens.time, "monotonic", lambda: now[0])
    key = b"minitask:{a:q}:wake\x1b[2J"
    wake_tokens.taken([key, b"\x1b[31m" + b"x" * 5000])
    wake_tokens.taken([key, b"y"])
    wake_tokens.taken([key, b"z"])
    wake_tokens.taken([b"minitask:{a:other}:wake", b"2"])
    said = lines(caplog)
    assert len(said) == 2, said
    assert "minitask:{a:q}:wake\\x1b[2J" in said[0] and "(5,005 bytes, not shown)" in said[0]
    assert "x" * 20 not in said[0] and "\x1b" not in said[0]
    assert "minitask:{a:other}:wake" in said[1]
    now[0] += wake_tokens.SAID_EVERY
    wake_tokens.taken([key, b"w"])
    assert "; 2 more since the last line" in lines(caplog)[-1]


def test_memory_stays_bounded_whatever_the_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for index in range(wake_tokens.KEYS_KEPT + 50):
        wake_tokens.taken([f"minitask:{{a:q{index}}}:wake".encode(), b"x"])
    assert len(wake_tokens._SAID) == wake_tokens.KEYS_KEPT
