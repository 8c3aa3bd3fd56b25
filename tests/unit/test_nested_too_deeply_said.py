"""Data nested deeper than msgpack reads is said as such (issue 29, probe 29d's L2):
``minitask inspect workflow ID`` of a planted deeply nested plan said "cannot decode the
plan record: StackError: ", msgpack's StackError carrying no message."""
from __future__ import annotations

import pytest

from minitask.errors import DecodeError
from minitask.wire.serializer import decode_message, unpack_data

DEEP = b"\x91" * 200_000 + b"\xc0"


def test_a_plan_nested_too_deeply_says_so() -> None:
    with pytest.raises(DecodeError) as caught:
        unpack_data(DEEP, "the plan record")
    assert str(caught.value).startswith(
        "cannot decode the plan record: StackError: nested too deeply"), str(caught.value)


def test_a_message_nested_too_deeply_says_so() -> None:
    with pytest.raises(DecodeError, match="StackError: nested too deeply"):
        decode_message(DEEP)
