"""The producer's fast paths make exactly what the general ones make."""
from __future__ import annotations

import enum
import hashlib

import redis

from minitask.wire.message import Message, new_message
from minitask.broker.packing import PackedScript


class _Level(enum.IntEnum):
    HIGH = 7


class _Name(str):
    pass


def test_new_message_is_the_message_the_dataclass_makes() -> None:
    fast = new_message("id-1", "app.add", [1, "x"], {"k": 2}, "default", 5, 1_700_000_000_000,
                       None)
    slow = Message(id="id-1", task="app.add", args=[1, "x"], kwargs={"k": 2}, queue="default",
                   priority=5, enqueued_at_ms=1_700_000_000_000, eta_ms=None)
    assert fast == slow and vars(fast) == vars(slow)
    assert fast.attempt == 1 and fast.workflow is None
    delayed = new_message("id-2", "app.add", [], {}, "q", 0, 1, 5)
    assert delayed == Message(id="id-2", task="app.add", args=[], kwargs={}, queue="q",
                              priority=0, enqueued_at_ms=1, eta_ms=5)


def test_new_message_is_still_frozen_and_skips_no_post_init() -> None:
    message = new_message("id-1", "app.add", [], {}, "default", 5, 1, None)
    try:
        message.priority = 3  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("a Message from new_message() could be changed")
    # new_message() bypasses __init__: a __post_init__ added later would be skipped.
    assert not hasattr(Message, "__post_init__")


def test_packed_script_call_is_byte_for_byte_what_redis_py_sends() -> None:
    source = "return 1"
    keys = ["minitask:{app:q}:messages", "minitask:{app:q}:delayed"]
    script = PackedScript("s", source, keys)
    sha = hashlib.sha1(source.encode()).hexdigest()
    tail = ["minitask:{app:q}:result:é", 1_764_000_000_000, -3, b"\x00\xffbody", True, 1.5,
            _Level.HIGH, _Name("named"), "plain"]
    expected = b"".join(redis.Connection().pack_command(
        "EVALSHA", sha, len(keys) + 1, *keys, *[str(p) if isinstance(p, (bool, enum.Enum))
                                                else p for p in tail]))
    assert script.pack(tail, 1) == expected
