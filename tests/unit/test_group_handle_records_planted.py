"""``app.group_handle(id)`` on handle records planted in Redis (issue 29, probe 18): a
record nesting groups 510 levels deep gives a status, not RecursionError; a member
holding a 300 kB string is refused in a short message, not one quoting it whole; a
member naming a queue no app may have (``a}{:x\\n``) or an id longer than any task's
is refused as a record minitask did not write, naming the problem."""
from __future__ import annotations

from typing import Callable

import msgpack  # type: ignore[import-untyped]
import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.errors import ConfigurationError

GID = "planted0000000000000001"


def _app(make_app: Callable[..., Minitask]) -> Minitask:
    app = make_app("shop")

    @app.task(name="shop.add")
    def add(x: int) -> int:
        return x

    return app


def test_a_record_nested_510_levels_deep_gives_a_status(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app = _app(make_app)
    levels = 510
    body = (b"\x81\xa1g\x91" + b"\x82\xa1g\x91" * levels + b"\x81\xa1g\x90"
            + b"\xa2id\xa1x" * levels)  # {"g": [{"g": [... {"g": []} ...], "id": "x"}]}
    redis_client.set(queue_keys("shop", "default").handle(GID), body)
    try:
        handle = app.group_handle(GID)
    except ConfigurationError as exc:  # refusing it, saying why, is as good
        assert len(str(exc)) < 1_000
        return
    assert isinstance(handle.status(), dict)


@pytest.mark.parametrize("member", [
    {"e": "A" * 300_000, "f": None},
    {"e": None, "f": ["a}{:x\n", "id1"]},
    {"e": None, "f": ["q" * 5000, "i" * 5000]},
    {"e": None, "f": ["default", "i" * 5000]},
    {"e": ["default\u202e", "id0"], "f": ["default", "id1"]},
], ids=["a 300 kB member", "a queue name no app may have", "a 5000-character queue name",
        "a 5000-character task id", "an entry in a queue with a bidi control"])
def test_a_member_no_minitask_wrote_is_refused_in_a_short_message(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        member: object) -> None:
    app = _app(make_app)
    redis_client.set(queue_keys("shop", "default").handle(GID),
                     msgpack.packb({"g": [{"e": None, "f": ["default", "ok1"]}, member]}))
    with pytest.raises(ConfigurationError, match="not one minitask wrote") as caught:
        app.group_handle(GID)
    said = str(caught.value)
    assert len(said) < 1_000, len(said)
    assert "\n" not in said and "\u202e" not in said, said


@pytest.mark.parametrize("nested_id", [b"\x91" * 1000 + b"\x90", b"\xcd\x01\x00", b"\xc0"],
                         ids=["nested deep", "a number", "nil"])
def test_a_nested_group_whose_id_is_no_id_is_refused(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        nested_id: bytes) -> None:
    app = _app(make_app)
    # {"g": [{"g": [], "id": <nested_id>}]}
    redis_client.set(queue_keys("shop", "default").handle(GID),
                     b"\x81\xa1g\x91\x82\xa1g\x90\xa2id" + nested_id)
    with pytest.raises(ConfigurationError, match="not one minitask wrote") as caught:
        app.group_handle(GID)
    assert len(str(caught.value)) < 1_000
