"""msgpack <-> Message and Outcome: what round-trips, what is refused, and where."""
from __future__ import annotations

import datetime as dt
import enum
from typing import Any, Dict

import msgpack  # type: ignore[import-untyped]
import pytest

from minitask import DecodeError, EncodeError, SerializationError
from minitask.wire.message import ENVELOPE_VERSION, Message, Outcome
from minitask.wire.serializer import (check_arguments, check_value, decode_message, decode_outcome,
                                      encode_message, encode_outcome)

UTC = dt.timezone.utc
PLUS_5_30 = dt.timezone(dt.timedelta(hours=5, minutes=30))
MINUS_8 = dt.timezone(dt.timedelta(hours=-8))


def message_with(args: Any = (), kwargs: Any = None, **fields: Any) -> Message:
    values: Dict[str, Any] = dict(id="id-1", task="shop.send", args=list(args),
                                  kwargs=dict(kwargs or {}), queue="default", priority=5,
                                  enqueued_at_ms=1_800_000_000_000)
    values.update(fields)
    return Message(**values)


def round_trip(value: Any) -> Any:
    """Send ``value`` as the only argument of a message and read it back."""
    check_arguments("shop.send", [value], {})
    return decode_message(encode_message(message_with([value]))).args[0]


# -- what round-trips ---------------------------------------------------------

@pytest.mark.parametrize("value", [
    None, True, False, 0, 1, -1, 2 ** 63 - 1, -(2 ** 63), 0.0, -2.5, 1e300, float("inf"),
    "", "héllo wörld ✓", "x" * 10_000, b"", b"\x00\xffbytes",
    [], [1, "two", 3.0, None], {}, {"a": 1, "b": [1, 2, {"c": b"d"}]},
    {1: "int key", "s": "str key"}, [[[[["deep"]]]]],
], ids=repr)
def test_supported_value_round_trips_unchanged(value: Any) -> None:
    result = round_trip(value)
    assert result == value
    assert type(result) is type(value)


def test_bytes_arrive_as_bytes_and_str_as_str() -> None:
    result = round_trip({"raw": b"caf\xc3\xa9", "text": "café"})
    assert result == {"raw": b"caf\xc3\xa9", "text": "café"}
    assert isinstance(result["raw"], bytes)
    assert isinstance(result["text"], str)


def test_nan_round_trips_as_nan() -> None:
    result = round_trip(float("nan"))
    assert isinstance(result, float) and result != result


def test_tuples_arrive_as_lists_at_every_depth() -> None:
    result = round_trip((1, (2, 3), [4, (5,)], {"t": (6, 7)}))
    assert result == [1, [2, 3], [4, [5]], {"t": [6, 7]}]
    assert type(result) is list and type(result[1]) is list
    assert type(result[2][1]) is list and type(result[3]["t"]) is list


@pytest.mark.parametrize("when", [
    dt.datetime(2030, 5, 17, 12, 30, 45, 123456, tzinfo=UTC),
    dt.datetime(2030, 5, 17, 12, 30, 45, 999999, tzinfo=PLUS_5_30),
    dt.datetime(2030, 1, 1, 0, 0, 0, 1, tzinfo=MINUS_8),
    dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
    dt.datetime(1900, 1, 1, tzinfo=UTC),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
], ids=str)
def test_aware_datetime_arrives_as_aware_utc_datetime_at_the_same_instant(
        when: dt.datetime) -> None:
    result = round_trip(when)
    assert isinstance(result, dt.datetime)
    assert result.utcoffset() == dt.timedelta(0)
    assert result == when  # aware datetimes compare by instant, to the microsecond
    assert result.astimezone(UTC).replace(tzinfo=None) == \
        when.astimezone(UTC).replace(tzinfo=None)


def test_datetimes_nested_in_containers_and_kwargs_round_trip() -> None:
    when = dt.datetime(2031, 2, 3, 4, 5, 6, 7, tzinfo=PLUS_5_30)
    check_arguments("shop.send", [[when]], {"at": {"when": when}})
    decoded = decode_message(encode_message(message_with([[when]], {"at": {"when": when}})))
    assert decoded.args == [[when]]
    assert decoded.kwargs == {"at": {"when": when}}
    assert decoded.kwargs["at"]["when"].tzinfo is not None


def test_every_message_field_round_trips() -> None:
    original = message_with([1, "a"], {"k": b"v"}, id="abc", task="pkg.mod.fn", queue="emails",
                            priority=9, enqueued_at_ms=1_700_000_000_123,
                            eta_ms=1_700_000_005_000, attempt=3)
    assert decode_message(encode_message(original)) == original


def test_message_without_eta_keeps_eta_none() -> None:
    assert decode_message(encode_message(message_with())).eta_ms is None


def test_outcome_round_trips_with_value_and_error_fields() -> None:
    when = dt.datetime(2030, 1, 1, tzinfo=UTC)
    outcome = Outcome("succeeded", 1_800_000_000_000, value={"n": [1, 2], "at": when},
                      attempt=2)
    assert decode_outcome(encode_outcome(outcome)) == outcome
    failed = Outcome("failed", 1_800_000_000_001, exc_type="KeyError", message="'x'",
                     traceback="Traceback ...", reason="failed", attempt=1)
    assert decode_outcome(encode_outcome(failed)) == failed


def test_outcome_tuple_value_arrives_as_list() -> None:
    outcome = Outcome("succeeded", 1, value=(1, (2, 3)))
    assert decode_outcome(encode_outcome(outcome)).value == [1, [2, 3]]


def test_envelope_carries_the_version() -> None:
    raw = msgpack.unpackb(encode_message(message_with()), raw=False)
    assert raw["v"] == ENVELOPE_VERSION


# -- what is refused, and where -------------------------------------------------

class Point:
    pass


@pytest.mark.parametrize("args,kwargs,path", [
    ([Point()], {}, "args[0]"),
    ([1, {"when": {1, 2}}], {}, "args[1]['when']"),
    ([], {"x": [0, 1, Point()]}, "kwargs['x'][2]"),
    ([[[], [complex(1, 5)]]], {}, "args[0][1][0]"),
    ([(1, object())], {}, "args[0][1]"),
    ([], {"cfg": {"nested": {"id": range(1)}}}, "kwargs['cfg']['nested']['id']"),
    ([dt.date(2030, 1, 1)], {}, "args[0]"),
    ([dt.timedelta(seconds=3)], {}, "args[0]"),
    ([frozenset([1])], {}, "args[0]"),
    ([], {"f": len}, "kwargs['f']"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_unsupported_value_raises_encode_error_naming_task_and_exact_path(
        args: Any, kwargs: Any, path: str) -> None:
    with pytest.raises(EncodeError) as caught:
        check_arguments("shop.send", args, kwargs)
    error = caught.value
    assert isinstance(error, TypeError)
    assert isinstance(error, SerializationError)
    assert error.path == path
    assert error.task_name == "shop.send"
    assert path in str(error)
    assert "'shop.send'" in str(error)


def test_naive_datetime_is_rejected_with_its_path() -> None:
    naive = dt.datetime(2030, 1, 1, 12, 0)
    with pytest.raises(EncodeError) as caught:
        check_arguments("shop.send", [1, {"when": naive}], {})
    assert caught.value.path == "args[1]['when']"
    assert isinstance(caught.value, TypeError)


def test_naive_datetime_in_kwargs_is_rejected() -> None:
    with pytest.raises(EncodeError) as caught:
        check_arguments("shop.send", [], {"when": dt.datetime(2030, 1, 1)})
    assert caught.value.path == "kwargs['when']"


@pytest.mark.parametrize("value", [2 ** 63, -(2 ** 63) - 1, 2 ** 64, 10 ** 30, -(10 ** 30)])
def test_int_outside_signed_64_bits_is_rejected(value: int) -> None:
    with pytest.raises(EncodeError) as caught:
        check_arguments("shop.send", [], {"n": [value]})
    assert caught.value.path == "kwargs['n'][0]"


def test_int_enum_and_str_subclass_are_sent_as_their_base_value() -> None:
    class Colour(enum.IntEnum):
        RED = 1

    assert round_trip([Colour.RED]) == [1]


def test_dict_with_unsupported_key_is_rejected() -> None:
    with pytest.raises(EncodeError) as caught:
        check_value({Point(): 1}, "args[0]", "shop.send")
    assert caught.value.path.startswith("args[0]")


def test_every_dict_key_accepted_at_enqueue_decodes_at_the_worker() -> None:
    """A value accepted at enqueue must not turn into an undecodable message.

    msgpack decodes an array map key as a list, which cannot be a dict key: a
    tuple key must be refused at enqueue (EncodeError), never dead-lettered later.
    """
    value = {(1, 2): "pair"}
    try:
        check_arguments("shop.send", [value], {})
    except EncodeError as exc:
        assert exc.path.startswith("args[0]")
        return
    decoded = decode_message(encode_message(message_with([value])))
    assert decoded.args == [{(1, 2): "pair"}]


def test_unsupported_return_value_raises_encode_error_naming_the_return_value() -> None:
    with pytest.raises(EncodeError) as caught:
        encode_outcome(Outcome("succeeded", 1, value={"p": Point()}), task_name="shop.send")
    assert caught.value.path == "return value['p']"
    assert caught.value.task_name == "shop.send"


# -- what cannot be decoded ---------------------------------------------------

@pytest.mark.parametrize("data", [
    b"", b"\xc1", b"garbage bytes \xff\xfe", b"\x92\x01",  # truncated / reserved / not a map
    msgpack.packb([1, 2, 3]), msgpack.packb("a string"), msgpack.packb(None),
], ids=repr)
def test_garbage_bytes_raise_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_message(data)
    with pytest.raises(DecodeError):
        decode_outcome(data)


@pytest.mark.parametrize("version", [None, 0, ENVELOPE_VERSION + 1, 99, "1"])
def test_unknown_envelope_version_raises_decode_error(version: Any) -> None:
    raw = msgpack.unpackb(encode_message(message_with([1])), raw=False)
    if version is None:
        del raw["v"]
    else:
        raw["v"] = version
    with pytest.raises(DecodeError) as caught:
        decode_message(msgpack.packb(raw, use_bin_type=True))
    assert isinstance(caught.value, SerializationError)


def test_message_missing_a_field_raises_decode_error() -> None:
    raw = msgpack.unpackb(encode_message(message_with([1])), raw=False)
    del raw["task"]
    with pytest.raises(DecodeError):
        decode_message(msgpack.packb(raw, use_bin_type=True))


def test_message_with_a_non_string_task_raises_decode_error() -> None:
    raw = msgpack.unpackb(encode_message(message_with([1])), raw=False)
    raw["task"] = 12
    with pytest.raises(DecodeError):
        decode_message(msgpack.packb(raw, use_bin_type=True))


def test_outcome_with_unknown_version_raises_decode_error() -> None:
    raw = msgpack.unpackb(encode_outcome(Outcome("succeeded", 1, value=1)), raw=False)
    raw["v"] = 2
    with pytest.raises(DecodeError):
        decode_outcome(msgpack.packb(raw))
