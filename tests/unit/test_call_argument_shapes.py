"""The shapes of a call's arguments: delay_many takes one tuple or list per call,
apply_async takes args as a tuple or list and kwargs as a dict with str keys, and an option
given to the wrong method points to the right one; Redis is unchanged when refused."""
from __future__ import annotations

from typing import Any

import pytest

from minitask import ArgumentError, Minitask, Task
from tests.support.draining import drain
from tests.support.snapshots import refused

pytestmark = pytest.mark.app("shop")


@pytest.mark.parametrize("calls", [[{"to": "x"}], ["ab"], [("ok",), 5], [b"xy"], 5, None],
                         ids=repr)
def test_delay_many_takes_one_tuple_or_list_per_call(
        add: Task[Any, Any], fake_redis: Any, calls: Any) -> None:
    error = refused(fake_redis, ArgumentError, lambda: add.delay_many(calls), "'shop.add'",
                    "delay_many")
    assert isinstance(error, TypeError)


def test_delay_many_accepts_lists_and_generators(add: Task[Any, Any]) -> None:
    handles = add.delay_many(([i, i] for i in range(3)))
    assert [h.status() for h in handles] == ["queued"] * 3


@pytest.mark.parametrize("args", ["hello", b"ab", {"x": 1}, 5, range(2)], ids=repr)
def test_apply_async_args_must_be_a_tuple_or_list(
        add: Task[Any, Any], fake_redis: Any, args: Any) -> None:
    error = refused(fake_redis, ArgumentError, lambda: add.apply_async(args), "'shop.add'",
                    "tuple or list", repr(args)[:5])
    assert isinstance(error, TypeError)


@pytest.mark.parametrize("kwargs", [[("x", 1)], "x=1", {1: 2}, {b"x": 1}], ids=repr)
def test_apply_async_kwargs_must_be_a_dict_with_str_keys(
        add: Task[Any, Any], fake_redis: Any, kwargs: Any) -> None:
    refused(fake_redis, ArgumentError, lambda: add.apply_async((), kwargs), "'shop.add'", "kwargs")


def test_apply_async_takes_a_list_of_args_and_none_for_no_args(
        app: Minitask, add: Task[Any, Any]) -> None:
    loose: Any = add
    handles = [add.apply_async([1, 2]), loose.apply_async(None, {"x": 5})]
    drain(app.worker())
    assert [h.get(timeout=1) for h in handles] == [3, 5]


@pytest.mark.parametrize("option, value", [("priority", 9), ("queue", "urgent"),
                                           ("delay", 5), ("task_id", "t-1"), ("eta", 0)])
def test_an_enqueue_option_given_to_delay_points_to_apply_async(
        add: Task[Any, Any], fake_redis: Any, option: str, value: Any) -> None:
    loose: Any = add
    error = refused(fake_redis, ArgumentError, lambda: loose.delay(1, 2, **{option: value}),
                    "'shop.add'", f"'{option}'", f"apply_async(args, kwargs, {option}=")
    assert repr(value) in str(error)


def test_a_task_option_given_to_delay_points_to_the_decorator(add: Task[Any, Any],
                                                              fake_redis: Any) -> None:
    loose: Any = add
    refused(fake_redis, ArgumentError, lambda: loose.delay(1, 2, timeout=5), "@app.task(timeout=")


def test_an_unknown_keyword_gets_no_option_hint(add: Task[Any, Any], fake_redis: Any) -> None:
    loose: Any = add
    error = refused(fake_redis, ArgumentError, lambda: loose.delay(1, 2, colour=5), "'colour'")
    assert "apply_async" not in str(error)
