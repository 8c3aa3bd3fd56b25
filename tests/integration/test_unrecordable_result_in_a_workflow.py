"""A result Redis refuses after its workflow went on with it (one over the server's
``proto-max-bulk-len``, over no cap of minitask's) is dead-lettered without ending its
workflow dead as well: the next step got the value, so the error callback does not
run and the workflow is not said to have failed (review 14: both happened, and with
outcomes recorded in batches the listeners heard both a success and a failure)."""
from __future__ import annotations

from typing import Any, Callable, List

import pytest

from minitask import Minitask, TaskFailed
from tests.support.draining import drain

pytestmark = pytest.mark.integration


def test_a_steps_unrecordable_result_does_not_end_its_workflow_dead_too(
        start_redis: Callable[..., Any]) -> None:
    server = start_redis("--proto-max-bulk-len", "1mb")
    app = Minitask("steps", broker=server.url, max_result_bytes=8_000_000)
    ran: List[str] = []

    @app.task(name="big")
    def big() -> str:
        ran.append("big")
        return "x" * 1_200_000  # over the server's 1 MiB, under max_result_bytes

    @app.task(name="after")
    def after() -> str:
        ran.append("after")
        return "after"

    @app.task(name="errback")
    def errback(*_: Any) -> None:
        ran.append("errback")

    chain = (big.si() | after.si()).on_error(errback.si())
    first = chain.delay()
    drain(app.worker())
    assert ran == ["big", "after"], ran  # the chain had gone on with the value
    [dead] = app.dead_letters()
    assert dead.reason.startswith("Redis refused its result")
    with pytest.raises(TaskFailed, match="Redis refused its result"):
        app.handle(dead.task_id).get(timeout=1)
    assert first.get(timeout=1) == "after"
    app.close()
