"""Input hardening at the producer: numbers, names, argument containers, unencodable values.

Each bad input is refused when the decorator runs or when the call is made, with
an error that names the task (or app) and shows the offending value, and Redis is
left exactly as it was.
"""
from __future__ import annotations

import datetime as dt
import math
from typing import Any, Callable, Dict, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitask import ArgumentError, ConfigurationError, EncodeError, Minitask, Task
from minitask.broker import keys
from minitask.wire import message
from minitask.wire.message import MAX_RETRIES, Outcome
from minitask.wire.serializer import (MAX_DEPTH, check_arguments, decode_message, decode_outcome,
                                      encode_message, encode_outcome)
from tests.support.draining import drain

UTC = dt.timezone.utc
NAN, INF = math.nan, math.inf


def snapshot(fake_redis: Any) -> Dict[Any, Any]:
    """Every key with its full content: equal snapshots mean Redis is unchanged."""
    dump = {}
    for key in fake_redis.keys("*"):
        kind = fake_redis.type(key)
        reader = {b"string": fake_redis.get, b"hash": fake_redis.hgetall, b"list":
                  lambda k: fake_redis.lrange(k, 0, -1), b"set": fake_redis.smembers,
                  b"zset": lambda k: fake_redis.zrange(k, 0, -1, withscores=True)}[kind]
        dump[key] = (kind, reader(key))
    return dump


pytestmark = pytest.mark.app("shop")


@pytest.fixture
def add(app: Minitask, fake_redis: Any) -> Task[Any, Any]:
    """A task, with Redis already holding a queued and a scheduled call of it."""
    @app.task(name="shop.add")
    def add(x: Any = 0, y: Any = 0) -> Any:
        return x + y

    add.delay(1, 2)
    add.apply_in(60, 3, 4)
    return add


def refused(fake_redis: Any, error: type, call: Callable[[], Any], *words: str) -> BaseException:
    """``call()`` raises ``error`` whose message holds ``words``; Redis is unchanged."""
    before = snapshot(fake_redis)
    with pytest.raises(error) as caught:
        call()
    for word in words:
        assert word in str(caught.value), str(caught.value)
    assert snapshot(fake_redis) == before
    return caught.value


# -- item 6: non-finite and wrong-typed numbers ----------------------------------------

@pytest.mark.parametrize("seconds", [NAN, INF, -INF, 1e300, 1e308, "5", None, True, [5]],
                         ids=repr)
def test_apply_in_refuses_a_time_that_is_not_a_finite_number_of_seconds_ahead(
        add: Task[Any, Any], fake_redis: Any, seconds: Any) -> None:
    error = refused(fake_redis, ConfigurationError, lambda: add.apply_in(seconds, 1, 2),
                    "'shop.add'", "apply_in", repr(seconds))
    assert isinstance(error, ValueError)


@pytest.mark.parametrize("when", [NAN, INF, -INF, 1e300, "1800000000", None, False,
                                  dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                                  dt.datetime(9999, 12, 31, 20, tzinfo=dt.timezone(
                                      dt.timedelta(hours=-8)))], ids=repr)
def test_apply_at_refuses_a_time_that_is_not_a_finite_timestamp_before_year_10000(
        add: Task[Any, Any], fake_redis: Any, when: Any) -> None:
    refused(fake_redis, ConfigurationError, lambda: add.apply_at(when, 1, 2), "'shop.add'", "eta")


@pytest.mark.parametrize("options", [
    {"delay": NAN}, {"delay": INF}, {"delay": "5"}, {"delay": 1e300},
    {"eta": NAN}, {"eta": -INF}, {"eta": 1e20},
], ids=repr)
def test_apply_async_refuses_a_delay_or_eta_that_is_not_a_finite_time(
        add: Task[Any, Any], fake_redis: Any, options: Dict[str, Any]) -> None:
    refused(fake_redis, ConfigurationError, lambda: add.apply_async((1, 2), **options),
            "'shop.add'")


def test_the_farthest_times_that_fit_are_accepted(app: Minitask, add: Task[Any, Any],
                                                  clock: Any) -> None:
    century = add.apply_in(100 * 365 * 86400.0, 1, 2)
    last = add.apply_at(dt.datetime(9999, 12, 31, 23, 59, 59, 998000, tzinfo=UTC), 1, 2)
    past = add.apply_at(-1e300, 1, 2)  # long ago: at once
    assert century.status() == last.status() == "scheduled"
    assert past.status() == "queued"


@pytest.mark.parametrize("options", [
    {"timeout": NAN}, {"timeout": INF}, {"timeout": -INF}, {"timeout": 1e300},
    {"timeout": "60"}, {"timeout": True},
    {"result_ttl": NAN}, {"result_ttl": INF}, {"result_ttl": 1e300},
    {"retry_backoff": NAN}, {"retry_backoff_max": INF}, {"retry_backoff": -1.0},
    {"retries": True}, {"retries": MAX_RETRIES + 1}, {"retries": 10 ** 30},
    {"ignore_result": "no"},
], ids=repr)
def test_decorator_refuses_non_finite_or_wrong_typed_numbers_naming_task_and_value(
        app: Minitask, options: Dict[str, Any]) -> None:
    def job() -> None:
        pass

    with pytest.raises(ConfigurationError) as caught:
        app.task(name="shop.job", **options)(job)
    [(option, value)] = options.items()
    assert "'shop.job'" in str(caught.value) and option in str(caught.value)
    assert repr(value) in str(caught.value)
    assert app.tasks == {}


def test_the_largest_accepted_options_still_run(app: Minitask) -> None:
    @app.task(timeout=3_155_760_000, result_ttl=3_155_760_000, retries=MAX_RETRIES,
              retry_backoff_max=3_155_760_000)
    def job() -> int:
        return 1

    handle = job.delay()
    assert drain(app.worker()) == 1
    assert handle.get(timeout=1) == 1


@pytest.mark.parametrize("options,option", [
    ({"result_ttl": NAN}, "result_ttl"), ({"result_ttl": math.inf}, "result_ttl"),
    ({"visibility_timeout": NAN}, "visibility_timeout"),
    ({"visibility_timeout": math.inf}, "visibility_timeout"),
    ({"visibility_timeout": 1e300}, "visibility_timeout"),
    ({"visibility_timeout": True}, "visibility_timeout"),
    ({"max_deliveries": True}, "max_deliveries"), ({"max_deliveries": 10 ** 30}, "max_deliveries"),
    ({"max_message_bytes": "x"}, "max_message_bytes"),
    ({"max_message_bytes": NAN}, "max_message_bytes"),
    ({"max_message_bytes": -1}, "max_message_bytes"),
])
def test_app_options_out_of_range_or_of_the_wrong_type_are_refused_at_once(
        fake_redis: Any, options: Dict[str, Any], option: str) -> None:
    with pytest.raises(ConfigurationError, match=option):
        Minitask("shop", broker=fake_redis, **options)
    assert fake_redis.dbsize() == 0


# -- item 7: values msgpack cannot take --------------------------------------------------

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


# -- item 8: names and task ids -------------------------------------------------------------

CONTROL = ["\x00", "\x0b", "\x0c", "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "\u200b",
           "\u202e", "\ufeff", "\ud800"]


@pytest.mark.parametrize("char", CONTROL + ["*", "?", "[", "]", "\\"], ids=repr)
def test_an_app_name_with_a_control_or_glob_character_is_refused(char: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Minitask(f"sh{char}op", broker="redis://127.0.0.1:1/0")
    assert repr(char)[1:-1] in str(caught.value)


def test_terminal_escape_sequences_are_refused_in_names() -> None:
    with pytest.raises(ConfigurationError, match="x1b"):
        Minitask("shop\x1b[2J\x1b[31m", broker="redis://127.0.0.1:1/0")


@pytest.mark.parametrize("char", CONTROL, ids=repr)
def test_a_queue_name_with_a_control_character_is_refused_everywhere(
        app: Minitask, add: Task[Any, Any], fake_redis: Any, char: str) -> None:
    queue = f"emails{char}"
    with pytest.raises(ConfigurationError):
        Minitask("shop", broker=fake_redis, default_queue=queue)
    with pytest.raises(ConfigurationError):
        app.task(queue=queue)(lambda: None)
    refused(fake_redis, ConfigurationError, lambda: add.apply_async((1, 2), queue=queue),
            repr(char)[1:-1])


def test_queue_names_may_hold_glob_characters(app: Minitask) -> None:
    assert app.task(queue="bulk*")(lambda: None).queue == "bulk*"


@pytest.mark.parametrize("char", CONTROL, ids=repr)
def test_a_task_name_with_a_control_character_is_refused(app: Minitask, char: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        app.task(name=f"shop.send{char}")(lambda: None)
    assert repr(char)[1:-1] in str(caught.value)
    assert app.tasks == {}


def test_a_default_task_name_with_a_control_character_asks_for_a_name(app: Minitask) -> None:
    def job() -> None:
        pass

    job.__module__ = "scripts.weird\nname"
    with pytest.raises(ConfigurationError, match="pass name="):
        app.task(job)
    assert app.task(name="scripts.job")(job).name == "scripts.job"


@pytest.mark.parametrize("name", [12, b"shop.send", "", ["a"]], ids=repr)
def test_a_task_name_that_is_not_a_non_empty_str_is_refused(app: Minitask, name: Any) -> None:
    with pytest.raises(ConfigurationError, match="name"):
        app.task(name=name)(lambda: None)


@pytest.mark.parametrize("task_id", [
    "order-1\n2030-01-01 00:00:00 INFO task x succeeded", "id\x1b[31mred", "a\u2028b",
    "a\x00b", "\u202eevil", "", 42, b"id"], ids=repr)
def test_a_task_id_that_could_forge_a_log_line_is_refused(
        add: Task[Any, Any], fake_redis: Any, task_id: Any) -> None:
    error = refused(fake_redis, ConfigurationError,
                    lambda: add.apply_async((1, 2), task_id=task_id), "'shop.add'", "task_id")
    assert repr(task_id)[1:-1] in str(error)


def test_printable_unicode_names_and_ids_are_accepted(app: Minitask) -> None:
    other = Minitask("boutique-\u00e9t\u00e9", broker=app.broker.client, clock=app.clock)

    @other.task(name="envoyer.\u00e9t\u00e9", queue="courriels-\u65e5\u672c")
    def send(x: int) -> int:
        return x

    handle = send.apply_async((1,), task_id="commande-\u00e9-42 \U0001f600")
    assert handle.status() == "queued"


def test_keys_and_message_refuse_the_same_unicode_categories() -> None:
    assert keys._UNPRINTABLE == message.UNPRINTABLE


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(min_size=1, max_size=6))
def test_every_name_that_message_calls_unprintable_is_refused_by_keys(text: str) -> None:
    if message.unprintable(text) is not None:
        with pytest.raises(ValueError):
            keys.check_name("queue", text)


# -- item 9: argument containers -----------------------------------------------------------

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
