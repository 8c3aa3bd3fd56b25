"""A look at the first queue behind outcomes stands for a fetch of it for at most
``LOOK_MOST``, however long its round trip took: a stalled round trip must not let
the second queue go first for as long."""
from __future__ import annotations

import pytest

from minitask import Minitask
from minitask.worker import sources

pytestmark = [pytest.mark.integration, pytest.mark.app("looks", on="server")]


@pytest.mark.parametrize("took, age, served", [
    (5.0, 0.5, "first"),            # held up 5 s: half a second later the look is stale
    (5.0, sources.LOOK_MOST / 2, "second"),  # within LOOK_MOST it still counts
    (0.004, 0.003, "second"),       # a quick round trip: counts for its own length
    (0.004, 0.008, "first"),
])
def test_a_look_counts_for_its_round_trip_and_never_longer_than_look_most(
        app: Minitask, monkeypatch: pytest.MonkeyPatch, took: float, age: float,
        served: str) -> None:
    @app.task(queue="first", ignore_result=True)
    def urgent() -> None:
        """Sent to the first queue after it was looked at."""

    @app.task(queue="second", ignore_result=True)
    def later() -> None:
        """Waiting in the second queue."""

    source = app.worker(queues=["first", "second"])._queues
    readings = iter([100.0, 100.0 + took, 100.0 + took + age])
    monkeypatch.setattr(sources, "monotonic", lambda: next(readings))
    held, result = source.ack_and_fetch([])
    assert held == [] and result.deliveries == []
    later.delay()
    urgent.delay()

    job = source.next_job()

    assert job is not None and job.queue == served
