"""The warning of a process exiting past leftover threads names at most NAMED_MOST of
them and counts the rest: a task that starts a thread at every call left hundreds."""
from __future__ import annotations

import threading

from minitask.worker.leftovers import NAMED_MOST, _named


def test_a_few_are_named_and_the_rest_counted() -> None:
    threads = [threading.Thread(name=f"left-{n}") for n in range(NAMED_MOST + 5)]
    said = _named(threads)
    assert said.split(", ")[:NAMED_MOST - 1] == [f"left-{n}" for n in range(NAMED_MOST - 1)]
    assert said.endswith(f"left-{NAMED_MOST - 1} and 5 more")
    assert _named(threads[:2]) == "left-0, left-1"
