"""ResultTimeout says what to do: where the task is, and whether a live worker serves its
queue; get() on an id the broker does not know fails at once instead of waiting."""
from __future__ import annotations

import time
from typing import Callable

import pytest

from minitask import Minitask, ResultTimeout
from tests.support.draining import drain


def beat(app: Minitask, name: str, queues: str) -> None:
    """A live worker, as its heartbeat records it."""
    now_ms = int(time.time() * 1000)
    app.broker.registry.heartbeat(name, {"queues": queues, "beat_ms": now_ms}, now_ms,
                                  ttl_ms=60_000)


def test_a_queued_task_with_no_live_worker_says_so_and_how_to_start_one(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")

    @app.task(queue="emails")
    def send() -> None:
        pass

    beat(app, "web1.1.abc", "default")  # a worker, but not of this queue
    with pytest.raises(ResultTimeout) as caught:
        send.delay().get(timeout=0.01)
    text = str(caught.value)
    assert "still queued" in text
    assert "no live worker serves queue 'emails'" in text
    assert "-Q emails" in text


def test_a_queued_task_names_the_live_workers_that_serve_its_queue(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")

    @app.task
    def send() -> None:
        pass

    beat(app, "web1.1.abc", "default,emails")
    with pytest.raises(ResultTimeout) as caught:
        send.delay().get(timeout=0.01)
    assert "1 live worker(s) serve queue 'default' (web1.1.abc)" in str(caught.value)


def test_a_scheduled_task_says_when_it_is_due(make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def later() -> None:
        pass

    with pytest.raises(ResultTimeout) as caught:
        later.apply_in(3600).get(timeout=0.01)
    assert "it is scheduled (next run due at " in str(caught.value)


def test_a_retrying_task_says_so(make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task(retries=3, retry_backoff=600)
    def flaky() -> None:
        raise OSError("down")

    handle = flaky.delay()
    drain(app.worker(burst=True))
    with pytest.raises(ResultTimeout, match="it is retrying"):
        handle.get(timeout=0.01)


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_get_on_an_unknown_id_fails_at_once(make_app: Callable[..., Minitask],
                                            timeout: float) -> None:
    app = make_app()
    app.task(lambda: None)
    # with timeout=None it used to wait forever: the test's own timeout would end it
    with pytest.raises(ResultTimeout) as caught:
        app.handle("never-enqueued").get(timeout=timeout)
    assert "is unknown" in str(caught.value)
    assert "same MINITASK_BROKER_URL" in str(caught.value)


def test_get_on_an_expired_result_fails_at_once(make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task(ignore_result=True)
    def fire() -> int:
        return 1

    handle = fire.delay()
    drain(app.worker(burst=True))
    with pytest.raises(ResultTimeout, match="unknown in queue 'default'"):
        handle.get(timeout=None)
