"""The app's queue registry (a set anyone with Redis access can fill) bounds no
listing by itself: status, the dashboard's pages and /api/queues show the queues the
app declares and at most SHOWN_OTHERS more, saying how many they leave out; /metrics
has series only of the queues the app declares; a lookup by id alone still finds a
task in any queue of the registry, the declared ones asked first."""
from __future__ import annotations

import io
import json
from typing import Any, Callable, Dict, List

import pytest
import redis

from minitask import Minitask
from minitask.admin import SHOWN_OTHERS, inspect, shown_queues
from minitask.broker.keys import AppKeys
from minitask.dashboard.web import Dashboard

PLANTED = 20_000


def _plant(client: "redis.Redis[bytes]", app: str) -> List[str]:
    names = [f"planted{i:05d}" for i in range(PLANTED)]
    for start in range(0, PLANTED, 5000):
        client.sadd(AppKeys(app).queues, *names[start:start + 5000])
    return names


def _get(app: Minitask, path: str) -> str:
    environ: Dict[str, Any] = {"REQUEST_METHOD": "GET", "PATH_INFO": path,
                               "QUERY_STRING": "", "wsgi.input": io.BytesIO(b""),
                               "HTTP_HOST": "127.0.0.1:5555"}
    statuses: List[str] = []
    body = b"".join(Dashboard(app)(environ, lambda status, headers: statuses.append(status)))
    assert statuses == ["200 OK"], (path, statuses)
    return body.decode()


@pytest.fixture
def shop(make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> Minitask:
    app = make_app("shop")

    @app.task(queue="mail")
    def send(n: int) -> int:
        return n

    _plant(redis_client, "shop")
    return app


def test_listings_show_the_declared_queues_and_a_bounded_number_of_others(
        shop: Minitask) -> None:
    shown, left_out = shown_queues(shop)
    assert {"default", "mail"} <= set(shown)
    assert len(shown) == 2 + SHOWN_OTHERS
    assert left_out == PLANTED - SHOWN_OTHERS
    api = json.loads(_get(shop, "/api/queues"))
    assert len(api["queues"]) == 2 + SHOWN_OTHERS
    assert api["queues_left_out"] == PLANTED - SHOWN_OTHERS
    assert f"and {PLANTED - SHOWN_OTHERS} more queue(s)" in _get(shop, "/")


def test_metrics_have_series_only_of_the_declared_queues(shop: Minitask) -> None:
    text = _get(shop, "/metrics")
    assert "planted" not in text
    assert 'minitask_queue_tasks{queue="mail",state="ready"}' in text


def test_a_task_in_any_registered_queue_is_still_found_by_its_id(
        shop: Minitask, make_app: Callable[..., Minitask]) -> None:
    """The last queue of the registry, asked in the last batch; and a declared one."""
    other = make_app("shop")  # the same app name: another process that declares more

    @other.task(queue=f"planted{PLANTED - 1:05d}")
    def late(n: int) -> int:
        return n

    @other.task(queue="mail", name="send")
    def send(n: int) -> int:
        return n

    far, near = late.delay(1), send.delay(2)
    assert (inspect(shop, far.id) or pytest.fail("not found")).queue == f"planted{PLANTED - 1:05d}"
    assert (inspect(shop, near.id) or pytest.fail("not found")).queue == "mail"
    assert inspect(shop, "no-such-task") is None


def test_dead_letters_of_a_registered_queue_are_listed(
        shop: Minitask, make_app: Callable[..., Minitask]) -> None:
    other = make_app("shop")

    @other.task(queue="planted12345", retries=0)
    def boom() -> None:
        raise ValueError("boom")

    handle = boom.delay()
    worker = other.worker(queues=["planted12345"], burst=True)
    while worker.run_once():
        pass
    assert [letter.task_id for letter in shop.dead_letters()] == [handle.id]
