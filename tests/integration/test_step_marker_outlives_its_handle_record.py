"""A workflow step's marker lives as long as the handle record that leads to it.

A chain's last step (a chord's body) whose own ``result_ttl`` is shorter than the
workflow's longest kept its marker only that long, while its handle record lived the
longest: once the step had run and its marker expired, ``cancel()`` read "promised,
no marker" as a step not sent yet, answered True and wrote a ``cancelled`` outcome
over a step that had succeeded. Now the marker lives the workflow's longest
``result_ttl`` too: the step reads as ended, never as not sent. Real TTLs on a real
redis-server (the last step keeps its result one second)."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from minitask import Minitask, chain, chord
from minitask.broker.keys import queue_keys
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.app("marks", on="server")]

#: The keys of the app's default queue.
KEYS = queue_keys("marks", "default")


def _workflows(app: Minitask) -> Any:
    @app.task(result_ttl=600)
    def first() -> int:
        return 1

    @app.task(result_ttl=1)
    def last(value: Any) -> int:
        return 2

    return {"chain": lambda: chain(first.s(), last.s()),
            "chord": lambda: chord([first.s()], last.s())}


@pytest.mark.parametrize("kind", ["chain", "chord"])
def test_a_step_that_ran_is_never_cancelled_as_not_sent_once_its_result_expired(
        app: Minitask, kind: str) -> None:
    build: Callable[[], Any] = _workflows(app)[kind]
    handle = build().delay()
    while app.worker(burst=True).run_once():
        pass
    assert handle.get(timeout=30) == 2
    client = app.broker.client
    marker, record = KEYS.once(handle.id), KEYS.handle(handle.id)
    # the invariant: the marker outlives the record that leads to it (both set in ms;
    # the marker was written after the record, so its ttl is at least as long)
    assert client.pttl(marker) >= client.pttl(record) > 60_000
    wait_until(lambda: not client.exists(KEYS.result(handle.id)), 30,
               message="the last step's result to expire (its result_ttl: 1 s)")
    for some in (app.handle(handle.id), handle):  # rebuilt from its record; delay()'s
        assert some.cancel() is False
        assert some.status() == "unknown"
    assert not client.exists(KEYS.result(handle.id))
    assert client.hget(marker, "state") == b"sent"
