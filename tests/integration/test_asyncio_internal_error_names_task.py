"""An internal error of a pool (one no check foresaw, here: building the task's
context) dead-letters the attempt named by its task, as the message was decoded (issue
29, probe 18): it was dead-lettered as "(undecodable)", on the asyncio pool and the
thread pool alike."""
from __future__ import annotations

import logging
from typing import Any, Callable

import pytest

from minitask import Minitask

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("pool, plain", [("asyncio", False), ("asyncio", True),
                                         ("thread", True)])
def test_an_internal_error_dead_letters_the_task_by_its_name(
        make_app: Callable[..., Minitask], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, pool: str, plain: bool) -> None:
    app = make_app("shop")

    if plain:
        @app.task(name="shop.job")
        def job() -> None:
            pass
    else:
        @app.task(name="shop.job")
        async def job() -> None:
            pass

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OverflowError("date value out of range")

    where = "pools.coroutines" if pool == "asyncio" else "runner"
    monkeypatch.setattr(f"minitask.worker.{where}.running", broken)
    handle = job.delay()
    with caplog.at_level(logging.ERROR, logger="minitask.worker.outcomes"):
        app.worker(pool=pool, concurrency=2, burst=True).run()
    assert handle.status() == "failed"
    [dead] = app.dead_letters()
    assert dead.task_id == handle.id and dead.reason == "internal error while handling it"
    [said] = [record for record in caplog.records if "is dead" in record.msg]
    assert said.args[1] == "shop.job"  # (shown id, task name, reason, ...)
    assert said.args[2] == "internal error while handling it"
