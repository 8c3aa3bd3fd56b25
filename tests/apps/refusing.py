"""tests.apps.basic, whose worker's fetches of one queue Redis refuses with the fetch
script's own runtime error while a file exists: a queue set aside for good, for the
tests of what a worker does then (no planted data is known to refuse a fetch any more:
a leases key or ready list of another type is moved aside, tests/unit/
test_fetch_keys_never_error.py searches for one).

``TEST_REFUSED_QUEUE`` names the queue, ``TEST_REFUSED_WHILE`` the file: while it
exists, each fetch of that queue (alone or behind outcomes) is sent a count the real
fetch.lua cannot read, and Redis refuses it ("attempt to compare"); once the file is
deleted, the queue is served again."""
from __future__ import annotations

import os
from typing import Any

from minitask.stores.queue import QueueStore
from tests.apps.basic import app  # noqa: F401  (the app the worker runs)

_REFUSED = os.environ.get("TEST_REFUSED_QUEUE", "")
_WHILE = os.environ.get("TEST_REFUSED_WHILE", "")
_sound = QueueStore.fetch_call


def _fetch_call(self: QueueStore, queue: str, now_ms: Any, terms: Any) -> Any:
    name, shard, keys, args, count = _sound(self, queue, now_ms, terms)
    if queue == _REFUSED and _WHILE and os.path.exists(_WHILE):
        args = (args[0], args[1], b"many", *args[3:])
    return (name, shard, keys, args, count)


QueueStore.fetch_call = _fetch_call  # type: ignore[method-assign]
