"""A flow pace key holding a time far in the future (data minitask did not write) is
ignored: the limiter's tasks run at its rate, not in the year 5138."""
from __future__ import annotations

from typing import Callable

import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys

#: 100,000,000,000,000 ms after 1970: about the year 5138.
FAR = 100_000_000_000_000


@pytest.mark.parametrize("rate, kind", [("1000/s", "pace"), ("5/s", "starts")])
def test_a_pace_far_in_the_future_does_not_park_the_limiter(
        make_app: Callable[..., Minitask], rate: str, kind: str) -> None:
    app = make_app()

    @app.task(rate_limit=rate, name="paced")
    def paced(n: int) -> int:
        return n

    limiter_keys = queue_keys(app.name, "default").flow_prefix + "5:paced"
    client = app.broker.client
    if kind == "pace":  # a rate of 500 or more a window keeps a pace alone
        client.set(limiter_keys + ":pace", str(FAR))
    else:  # a lower rate keeps its pace in its log of starts, as member ''
        client.zadd(limiter_keys + ":starts", {"": FAR})
    handle = paced.delay(7)
    worker = app.worker()
    assert worker.run_once()
    assert handle.get(timeout=1) == 7
    state = app.broker.flow.limiter_state("default", "5:paced")
    assert state["parked"] == 0 and state["due_ms"] is None
    if kind == "pace":  # the start wrote a pace of its own over it
        assert float(client.get(limiter_keys + ":pace") or 0) < FAR
    else:
        assert (client.zscore(limiter_keys + ":starts", "") or 0) < FAR
