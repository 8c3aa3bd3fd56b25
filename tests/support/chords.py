"""A chord sent and not yet run, for tests that damage its group's state."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis

from minitask import Minitask, TaskFailed, chord


def sent_chord(make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]"
               ) -> Tuple[Minitask, List[int], Any, bytes]:
    """An app whose chord of two adds into a total is sent, not run: the app, the
    totals its body saw, the chord's handle and its group's state key."""
    app = make_app("wf")
    seen: List[int] = []

    @app.task(retries=0)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(retries=0)
    def total(values: List[int]) -> None:
        seen.append(sum(values))

    handle = chord([add.s(1, 1), add.s(2, 2)], total.s()).delay()
    group_key = [key for key in redis_client.keys("*group*") if b"results" not in key][0]
    return app, seen, handle, group_key


def body_ended(app: Minitask, seen: List[int], handle: Any,
               match: str = "the group cannot complete") -> List[str]:
    """Run the sent chord's members in a burst worker; check its body never ran and
    ended cancelled, its error matching ``match``; the messages of the dead letters
    that say why."""
    worker = app.worker(burst=True)
    for _ in range(20):
        if not worker.run_once():
            break
    assert seen == []
    assert handle.status() == "cancelled"
    with pytest.raises(TaskFailed, match=match):
        handle.get(timeout=0)
    return [letter.message for letter in app.dead_letters()]


def planted_state_ends_body(make_app: Callable[..., Minitask],
                            redis_client: "redis.Redis[bytes]",
                            fields: Dict[str, bytes]) -> Tuple[List[str], bytes]:
    """Send a chord, plant ``fields`` in its group's state, run it (``body_ended``):
    the dead letters' messages, and the group's key."""
    app, seen, handle, group_key = sent_chord(make_app, redis_client)
    redis_client.hset(group_key, mapping=fields)  # type: ignore[arg-type]
    return body_ended(app, seen, handle), group_key
