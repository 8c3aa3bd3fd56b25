"""The app's queue registry (a set anyone with Redis access can fill) bounds no
listing by itself: status, the dashboard's pages and /api/queues show the queues the
app declares and at most SHOWN_OTHERS more, saying how many they leave out; /metrics
has series only of the queues the app declares; a lookup by id alone (and the
listing of dead letters) asks the declared queues first, then at most LOOKUP_OTHERS
of the registry, and says how many it did not ask."""
from __future__ import annotations

import io
import json
from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.admin import LOOKUP_OTHERS, SHOWN_OTHERS, inspect, lookup_queues, shown_queues
from minitask.cli.main import main
from minitask.broker.keys import AppKeys
from minitask.dashboard.web import Dashboard

PLANTED = 20_000


def _names() -> List[str]:
    return [f"planted{i:05d}" for i in range(PLANTED)]


def _plant(client: "redis.Redis[bytes]", app: str) -> List[str]:
    names = _names()
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


def test_a_lookup_by_id_asks_the_declared_queues_and_a_bounded_number_of_others(
        shop: Minitask, make_app: Callable[..., Minitask], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The last queue asked, in the last batch, and a declared one are found; one
    past the bound is not, and the CLI says how many queues it did not ask (20,000
    planted names made 40 round trips of it)."""
    other = make_app("shop")  # the same app name: another process that declares more
    # which others are asked is the registry's order (SSCAN), not the names' order
    first = lookup_queues(shop)[0]
    last_asked = first[-1]
    not_asked = next(name for name in reversed(_names()) if name not in first)

    @other.task(queue=last_asked)
    def late(n: int) -> int:
        return n

    @other.task(queue=not_asked)
    def later(n: int) -> int:
        return n

    @other.task(queue="mail", name="send")
    def send(n: int) -> int:
        return n

    far, near, beyond = late.delay(1), send.delay(2), later.delay(3)
    assert (inspect(shop, far.id) or pytest.fail("not found")).queue == last_asked
    assert (inspect(shop, near.id) or pytest.fail("not found")).queue == "mail"
    assert inspect(shop, "no-such-task") is None
    assert inspect(shop, beyond.id) is None
    asked, left = lookup_queues(shop)
    assert asked[:2] == ["default", "mail"] and len(asked) == 2 + LOOKUP_OTHERS
    assert left == PLANTED - LOOKUP_OTHERS
    monkeypatch.setattr("minitask.cli.inspect.load", lambda _app: shop)
    assert main(["inspect", "-A", "shop", "no-such-task"]) == 1
    said = capsys.readouterr().out
    assert f"not found among the {2 + LOOKUP_OTHERS} queues looked at" in said, said
    assert f"{PLANTED - LOOKUP_OTHERS} more queue(s)" in said, said


def test_dead_letters_of_a_registered_queue_are_listed_up_to_the_bound(
        shop: Minitask, make_app: Callable[..., Minitask],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    other = make_app("shop")
    registered = lookup_queues(shop)[0][123]  # one the bounded read takes

    @other.task(queue=registered, retries=0)
    def boom() -> None:
        raise ValueError("boom")

    handle = boom.delay()
    worker = other.worker(queues=[registered], burst=True)
    while worker.run_once():
        pass
    assert [letter.task_id for letter in shop.dead_letters()] == [handle.id]
    assert shop.requeue_dead(handle.id) is True
    monkeypatch.setattr("minitask.cli.dead.load", lambda _app: shop)
    monkeypatch.setattr(shop, "close", lambda: None)
    assert main(["dead", "-A", "shop", "list"]) == 0
    said = capsys.readouterr().err
    assert f"{PLANTED - LOOKUP_OTHERS} more queue(s) in the registry were not looked at" in said


@pytest.mark.parametrize("command", [["inspect", "no-such-task"], ["dead", "show", "nosuch"],
                                     ["dead", "requeue", "nosuch", "nor-this"],
                                     ["dead", "purge", "nosuch", "nor-this"],
                                     ["dead", "list"]])
def test_a_lookup_reads_the_queue_registry_once(
        shop: Minitask, command: List[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """What a lookup asks and what it says it did not ask come from one reading of the
    registry (20,000 names here), whatever the number of ids."""
    reads: List[int] = []
    registry = shop.broker.queues.queue_registry

    def counted(*args: Any) -> Tuple[List[str], int]:
        reads.append(1)
        return registry(*args)

    monkeypatch.setattr(shop.broker.queues, "queue_registry", counted)
    monkeypatch.setattr(shop.broker.queues, "queue_names",
                        lambda *_: pytest.fail("the registry read apart from the lookup's"))
    for module in ("inspect", "dead"):
        monkeypatch.setattr(f"minitask.cli.{module}.load", lambda _app: shop)
    monkeypatch.setattr(shop, "close", lambda: None)
    main([command[0], "-A", "shop", *command[1:]])
    said = capsys.readouterr()
    assert len(reads) == 1, said
    if command[1] != "requeue" and command[1] != "purge":
        assert f"{PLANTED - LOOKUP_OTHERS} more queue(s)" in said.out + said.err
