"""Values msgpack cannot take (too deep, self-holding, lone surrogates) are encode errors
that name the task and the path to the value, whether arguments or a return value."""
from __future__ import annotations

from typing import Any, Dict, Tuple

import pytest

from minitask import EncodeError, Minitask, Task
from minitask.wire import message
from minitask.wire.message import Outcome
from minitask.wire.serializer import (MAX_DEPTH, check_arguments, decode_message, decode_outcome,
                                      encode_message, encode_outcome)
from tests.support.draining import drain
from tests.support.snapshots import refused

pytestmark = pytest.mark.app("shop")


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_10000_deep_list_is_an_encode_error_naming_task_and_path(
        add: Task[Any, Any], fake_redis: Any) -> None:
    error = refused(fake_redis, EncodeError, lambda: add.delay(nested(10_000)), "'shop.add'",
                    "args[0][0][0]", "levels deep")
    assert isinstance(error, EncodeError) and isinstance(error, TypeError)
    assert error.task_name == "shop.add"
    assert error.path == "args[0]" + "[0]" * MAX_DEPTH
    assert len(str(error)) < 600  # the path is shown cut short


def test_a_list_that_holds_itself_is_an_encode_error(add: Task[Any, Any], fake_redis: Any) -> None:
    loop: Any = [1]
    loop.append(loop)
    refused(fake_redis, EncodeError, lambda: add.delay(0, {"loop": loop}), "args[1]['loop'][1]")


def test_nesting_up_to_the_limit_round_trips(app: Minitask, add: Task[Any, Any]) -> None:
    check_arguments("shop.add", [nested(MAX_DEPTH)], {})
    with pytest.raises(EncodeError):
        check_arguments("shop.add", [nested(MAX_DEPTH + 1)], {})
    handle = add.delay(nested(MAX_DEPTH))
    body = app.broker.queues.message_body("default", handle.id)
    assert body is not None and decode_message(body).args[0] == nested(MAX_DEPTH)


@pytest.mark.parametrize("args, kwargs, path", [
    (("\ud800",), {}, "args[0]"),
    (("ok", ["x", "caf\u00e9 \udcff"]), {}, "args[1][1]"),
    ((), {"y": {"k": "\udfff"}}, "kwargs['y']['k']"),
    (({"\ud83d": 1},), {}, "args[0] key '\\ud83d'"),
], ids=lambda v: repr(v)[:30])
def test_a_lone_surrogate_is_an_encode_error_naming_task_and_path(
        add: Task[Any, Any], fake_redis: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any],
        path: str) -> None:
    error = refused(fake_redis, EncodeError, lambda: add.delay(*args, **kwargs), "'shop.add'",
                    "surrogate", path)
    assert isinstance(error, EncodeError) and error.path == path


def test_a_keyword_name_with_a_lone_surrogate_is_an_encode_error(
        app: Minitask, fake_redis: Any) -> None:
    @app.task(name="shop.any")
    def anything(**named: Any) -> None:
        pass

    refused(fake_redis, EncodeError, lambda: anything.delay(**{"\ud800": 1}), "'shop.any'",
            "kwargs key")


def test_astral_characters_are_not_surrogates(add: Task[Any, Any]) -> None:
    check_arguments("shop.add", ["emoji \U0001f600", {"\U0001f600": "\uffff"}], {})


def test_a_deep_return_value_fails_the_encode_with_its_path() -> None:
    with pytest.raises(EncodeError, match="return value"):
        encode_outcome(Outcome("succeeded", 1, value=nested(10_000)), task_name="shop.add")


def test_an_error_text_with_a_lone_surrogate_is_recorded_with_a_replacement() -> None:
    body = encode_outcome(Outcome("failed", 1, exc_type="ValueError", message="bad \ud800",
                                  traceback="line \udc80"))
    outcome = decode_outcome(body)
    assert outcome.message == "bad \ufffd" and outcome.traceback == "line \ufffd"


def test_a_task_failing_with_a_surrogate_in_its_message_is_recorded(app: Minitask) -> None:
    @app.task
    def fail() -> None:
        raise ValueError("bad \ud800 byte")

    handle = fail.delay()
    assert drain(app.worker()) == 1
    assert handle.status() == "failed"


def test_encode_message_turns_a_packing_error_into_an_encode_error() -> None:
    bad = message.Message(id="x", task="shop.add", args=["\ud800"], kwargs={}, queue="default",
                          priority=5, enqueued_at_ms=0)
    with pytest.raises(EncodeError, match="'shop.add'"):
        encode_message(bad)
