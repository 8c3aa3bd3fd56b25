"""``new_task_id`` makes what ``base64.urlsafe_b64encode`` of 16 random bytes begins
with (its own cheaper way): 22 url-safe characters, each id new."""
from __future__ import annotations

import base64
import re

import pytest

from minitask import options


def test_ids_are_the_url_safe_base64_of_their_random_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = []

    def urandom(size: int) -> bytes:
        data = bytes((len(drawn) * 37 + i * 91) % 256 for i in range(size))
        drawn.append(data)
        return data

    monkeypatch.setattr(options.os, "urandom", urandom)
    made = [options.new_task_id() for _ in range(64)]
    assert made == [base64.urlsafe_b64encode(data)[:22].decode("ascii") for data in drawn]
    assert any("-" in m or "_" in m for m in made)  # the url-safe alphabet was needed


def test_ids_are_22_url_safe_characters_and_new_each_time() -> None:
    made = {options.new_task_id() for _ in range(1000)}
    assert len(made) == 1000
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", m) for m in made)
