"""The serializer keeps a msgpack Packer per thread: the bytes stay those of
``msgpack.packb``, after a failed pack too, on any number of threads."""
from __future__ import annotations

import decimal
import threading
import uuid
from typing import Any, List

import msgpack  # type: ignore[import-untyped]
import pytest

from minitask.errors import EncodeError
from minitask.wire import serializer
from minitask.wire.message import Message, Outcome
from minitask.wire.types import pack_builtin

VALUES: List[Any] = [[1, "a", b"b", None, 1.5, True, {"k": [1, 2]}], uuid.UUID(int=7),
                     decimal.Decimal("1.5"), {"nested": {"deep": [[], {}]}}, 2 ** 63]


def packb(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True, datetime=True,  # type: ignore[no-any-return]
                         default=pack_builtin)


@pytest.mark.parametrize("value", VALUES)
def test_same_bytes_as_packb(value: Any) -> None:
    assert serializer._pack(value) == packb(value)
    assert serializer._pack(value) == packb(value)  # the kept Packer, again


def test_a_failed_pack_leaves_nothing_behind() -> None:
    serializer._pack([1, 2, 3])
    with pytest.raises(TypeError, match="cannot serialize 'object'"):
        serializer._pack(["partly", "packed", object()])
    assert serializer._pack(["after"]) == packb(["after"])
    with pytest.raises(EncodeError, match="a recent outcome"):
        serializer.pack_data([object()], "a recent outcome")
    outcome = Outcome("succeeded", 5, value=[1, "x"], attempt=1)
    assert serializer.decode_outcome(serializer.encode_outcome(outcome)) == outcome


def test_a_pack_within_a_pack_uses_a_packer_of_its_own() -> None:
    """What a signal handler that packs, run in the middle of a pack, would do."""
    inner: List[bytes] = []

    class Nested:
        pass

    def default(value: Any) -> Any:
        inner.append(serializer._pack({"inner": [1, 2]}))
        return "nested"

    serializer._packers.packer = msgpack.Packer(use_bin_type=True, default=default)
    try:
        assert serializer._pack(["outer", Nested()]) == packb(["outer", "nested"])
        assert inner == [packb({"inner": [1, 2]})]
        assert serializer._pack(["outer"]) == packb(["outer"])
    finally:  # the planted Packer must not pack the next tests' values on this thread
        serializer._packers.__dict__.pop("packer", None)


def test_threads_pack_with_their_own_packers() -> None:
    message = Message("id", "t", [1, "two"], {"k": 3.5}, "q", 0, 1)
    expected = serializer.encode_message(message)
    wrong: List[bytes] = []

    def pack_many() -> None:
        for _ in range(2000):
            packed = serializer.encode_message(message)
            if packed != expected:
                wrong.append(packed)

    threads = [threading.Thread(target=pack_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert wrong == []
