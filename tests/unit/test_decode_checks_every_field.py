"""Decoding checks every field of a message: a worker gets a sound Message or a DecodeError.

A message in Redis may come from another language, an older minitask, or a hand
that planted it. Whatever its bytes, ``decode_message`` returns a Message whose
fields have their types and ranges (so the worker's own code, the task context
included, cannot raise on it), or raises DecodeError naming the field: never
anything else.
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Dict

import msgpack  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minitask import DecodeError
from minitask.context import running
from minitask.wire.message import MAX_ATTEMPT, MAX_MS, Message, unprintable
from minitask.wire.serializer import MAX_DEPTH, decode_message, encode_message
from tests.support.envelopes import JUNK, NOW_MS, envelopes

UTC = dt.timezone.utc


def envelope(**changes: Any) -> Dict[str, Any]:
    """A valid envelope, with fields replaced (or removed, with ``...``)."""
    fields: Dict[str, Any] = {
        "v": 1, "id": "task-1", "task": "shop.send", "args": [1, "a"], "kwargs": {"k": 2},
        "queue": "default", "priority": 5, "enqueued_at_ms": NOW_MS, "eta_ms": None,
        "attempt": 1}
    for name, value in changes.items():
        if value is ...:
            del fields[name]
        else:
            fields[name] = value
    return fields


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True, datetime=True)  # type: ignore[no-any-return]


def assert_sound(message: Message) -> None:
    """Every field has its type and range, and the worker can use the message."""
    for text in (message.id, message.task, message.queue):
        assert type(text) is str and text and unprintable(text) is None
    assert type(message.args) is list
    assert type(message.kwargs) is dict and all(type(k) is str for k in message.kwargs)
    assert type(message.priority) is int and 0 <= message.priority <= 9
    assert type(message.enqueued_at_ms) is int and 0 <= message.enqueued_at_ms <= MAX_MS
    assert message.eta_ms is None or (type(message.eta_ms) is int
                                      and 0 <= message.eta_ms <= MAX_MS)
    assert type(message.attempt) is int and 1 <= message.attempt <= MAX_ATTEMPT
    with running(message, delivery=1) as context:  # what the worker builds for the attempt
        assert context.enqueued_at.tzinfo is not None
        assert context.eta is None or context.eta.tzinfo is not None
    # the worker re-encodes a message to retry it: that must work and round-trip
    # (compared as bytes: a NaN argument is not equal to itself)
    body = encode_message(message)
    assert encode_message(decode_message(body)) == body


def test_a_valid_message_decodes_and_is_sound() -> None:
    message = decode_message(pack(envelope(eta_ms=NOW_MS + 5000, attempt=3)))
    assert message == Message(id="task-1", task="shop.send", args=[1, "a"], kwargs={"k": 2},
                              queue="default", priority=5, enqueued_at_ms=NOW_MS,
                              eta_ms=NOW_MS + 5000, attempt=3)
    assert_sound(message)


def test_the_extremes_of_every_range_decode() -> None:
    for changes in [dict(priority=0, enqueued_at_ms=0, eta_ms=0, attempt=1),
                    dict(priority=9, enqueued_at_ms=MAX_MS, eta_ms=MAX_MS,
                         attempt=MAX_ATTEMPT)]:
        assert_sound(decode_message(pack(envelope(**changes))))


def test_a_message_without_eta_or_attempt_gets_the_defaults() -> None:
    message = decode_message(pack(envelope(eta_ms=..., attempt=...)))
    assert message.eta_ms is None and message.attempt == 1


@pytest.mark.parametrize("name, value, words", [
    ("eta_ms", "soon", ["'soon'", "int"]),
    ("eta_ms", 1.5, ["1.5"]),
    ("eta_ms", -1, ["-1"]),
    ("eta_ms", MAX_MS + 1, [str(MAX_MS + 1), "year 9999"]),
    ("enqueued_at_ms", NOW_MS * 1000, [str(NOW_MS * 1000), "milliseconds"]),
    ("enqueued_at_ms", -(2 ** 63), [str(-(2 ** 63))]),
    ("enqueued_at_ms", "1800000000000", ["'1800000000000'"]),
    ("enqueued_at_ms", True, ["True"]),
    ("enqueued_at_ms", None, ["None"]),
    ("attempt", 0, ["0", "from 1"]),
    ("attempt", -3, ["-3"]),
    ("attempt", 2 ** 62, [str(2 ** 62)]),
    ("attempt", 1.0, ["1.0"]),
    ("attempt", "2", ["'2'"]),
    ("priority", 10, ["10", "from 0 to 9"]),
    ("priority", -1, ["-1"]),
    ("priority", 5.0, ["5.0"]),
    ("priority", "5", ["'5'"]),
    ("priority", False, ["False"]),
    ("args", "ab", ["'ab'", "array"]),
    ("args", {"a": 1}, ["array"]),
    ("args", None, ["None"]),
    ("args", 7, ["7"]),
    ("args", [msgpack.ExtType(5, b"x")], ["ExtType"]),
    ("args", [{"k": [msgpack.ExtType(7, b"")]}], ["args[0]", "ExtType"]),
    ("kwargs", [["a", 1]], ["map"]),
    ("kwargs", "k=1", ["'k=1'"]),
    ("kwargs", {1: "one"}, ["key 1", "str"]),
    ("kwargs", {b"raw": 1}, ["b'raw'"]),
    ("kwargs", {"k": msgpack.ExtType(1, b"")}, ["kwargs['k']", "ExtType"]),
    ("task", 12, ["12", "str"]),
    ("task", b"shop.send", ["b'shop.send'"]),
    ("task", "", ["''"]),
    ("task", "shop.send\n2030-01-01 ERROR forged", ["control"]),
    ("id", None, ["None"]),
    ("id", ["x"], ["['x']"]),
    ("id", "x\x1b[2J", ["\\x1b", "control"]),
    ("id", "x\u2028y", ["\\u2028"]),
    ("queue", 3, ["3"]),
    ("queue", "emails\x00", ["\\x00"]),
    ("queue", "q\u202eevil", ["\\u202e"]),
], ids=lambda v: repr(v)[:40])
def test_a_field_of_the_wrong_type_or_range_is_a_decode_error_naming_it(
        name: str, value: Any, words: Any) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_message(pack(envelope(**{name: value})))
    text = str(caught.value)
    assert f"field {name!r}" in text, text
    for word in words:
        assert word in text, text


@pytest.mark.parametrize("name", ["id", "task", "args", "kwargs", "queue", "priority",
                                  "enqueued_at_ms"])
def test_a_missing_field_is_a_decode_error_naming_it(name: str) -> None:
    with pytest.raises(DecodeError, match=f"field {name!r} is missing"):
        decode_message(pack(envelope(**{name: ...})))


@pytest.mark.parametrize("version", [True, 1.0, "1", None, 2])
def test_only_the_int_1_is_envelope_version_1(version: Any) -> None:
    with pytest.raises(DecodeError, match="envelope version"):
        decode_message(pack(envelope(v=version)))


def test_the_error_names_the_task_id_when_it_is_readable() -> None:
    with pytest.raises(DecodeError, match="message 'order-7': field 'priority'"):
        decode_message(pack(envelope(id="order-7", priority=99)))


def test_arguments_nested_deeper_than_an_enqueue_allows_are_a_decode_error() -> None:
    deep: Any = []
    for _ in range(MAX_DEPTH):
        deep = [deep]
    with pytest.raises(DecodeError, match="nested more than"):
        decode_message(pack(envelope(args=[deep])))
    assert_sound(decode_message(pack(envelope(args=[deep[0]]))))


def test_a_huge_bad_value_is_shown_cut_short() -> None:
    with pytest.raises(DecodeError) as caught:
        decode_message(pack(envelope(args="x" * 100_000)))
    assert len(str(caught.value)) < 500


# -- any envelope at all ----------------------------------------------------------

_SETTINGS = settings(max_examples=400, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(envelopes())
def test_any_envelope_decodes_to_a_sound_message_or_raises_decode_error(obj: Any) -> None:
    try:
        message = decode_message(pack(obj))
    except DecodeError:
        return
    assert_sound(message)


@_SETTINGS
@given(st.binary(max_size=200))
def test_any_bytes_decode_to_a_sound_message_or_raise_decode_error(data: bytes) -> None:
    try:
        message = decode_message(data)
    except DecodeError:
        return
    assert_sound(message)


@_SETTINGS
@given(st.lists(JUNK, max_size=3), st.dictionaries(st.text(max_size=5), JUNK, max_size=3))
def test_junk_arguments_in_an_otherwise_valid_envelope_never_escape_as_another_error(
        args: Any, kwargs: Any) -> None:
    try:
        message = decode_message(pack(envelope(args=args, kwargs=kwargs)))
    except DecodeError as exc:
        assert "ExtType" in str(exc)  # the only junk an enqueue never sends
        return
    assert_sound(message)
