"""A planted result too large to read is said as the memory its key uses, not as "a
value of N bytes" (issue 29, probe 29d's L1): state.lua measures a result list with
MEMORY USAGE (a list holds no length of its elements), whose figure (58,720,424 for a
50 MB element) is the key's memory use, allocator rounding and overhead included."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.errors import DecodeError
from tests.apps.foreign import build

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

K = queue_keys("foreign", "other")
BIG = 5 << 20


def test_a_planted_result_is_said_by_its_memory_use(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    finished = app.tasks["mark"].apply_async(("done",))
    admin.delete(K.messages, *K.ready)
    admin.rpush(K.result(finished.id), b"\x92" + b"x" * BIG)
    with pytest.raises(DecodeError) as caught:
        finished.get(timeout=1)
    said = str(caught.value)
    assert "bytes of memory, not read" in said, said
    assert f"({BIG + 1:,} bytes" not in said
