"""A rate limit spaces a backlog's starts evenly, one every window / N, as the flow
control guide says (issue 29's trial: ``rate_limit="2/s"`` started its tasks in pairs,
0.25 s then 0.79 s apart, as each start was let in up to half a pace before its turn).
On fakeredis and on the suite's own redis-server, with a manual clock."""
from __future__ import annotations

from typing import Any, Callable, List

import pytest

from minitask import Minitask
from tests.integration.test_flow_scripts import max_in_window, stand_fakeredis_clock
from tests.support.clock import ManualClock

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("rate, window_ms, count", [("2/s", 1000, 2), ("5/s", 1000, 5),
                                                    ("30/m", 60_000, 30)])
def test_a_backlogs_starts_are_a_pace_apart(make_app: Callable[..., Minitask],
                                            clock: ManualClock, redis_client: Any,
                                            monkeypatch: pytest.MonkeyPatch, rate: str,
                                            window_ms: int, count: int) -> None:
    stand_fakeredis_clock(redis_client, monkeypatch)
    app = make_app()
    started: List[int] = []

    @app.task(rate_limit=rate, name="call_api")
    def call_api(n: int) -> None:
        started.append(clock.now_ms())

    call_api.delay_many([(n,) for n in range(3 * count)])
    worker = app.worker()
    step = window_ms // count // 20  # a worker that looks often: always ready
    for _ in range(200 * count):
        worker.run_once()
        clock.advance(step / 1000)
        if len(started) == 3 * count:
            break
    assert len(started) == 3 * count
    pace = window_ms / count
    gaps = [later - earlier for earlier, later in zip(started, started[1:])]
    assert min(gaps) >= pace * 0.95, gaps  # 0.25 s at 2/s before: starts in pairs
    assert max_in_window(started, window_ms) <= count
