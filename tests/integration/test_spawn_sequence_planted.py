"""A workflow step sent with a delay takes the queue's scheduling sequence (spawn.lua),
on a real redis-server. A sequence that is no count minitask writes (text, or at 2^63 - 1
where INCR overflows: data minitask did not write) failed the call after its first
writes: the step's marker said "sent" and its message was delayed, yet the caller was
told the send failed, and every later delayed step of the queue failed the same way.
It starts afresh now, as enqueue.lua's does (lib.lua's bump)."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask, chain
from minitask.broker.keys import QueueKeys

pytestmark = [pytest.mark.integration, pytest.mark.app("spawnseq", on="server")]

K = QueueKeys("spawnseq", "default")


@pytest.mark.parametrize("planted", [b"abc", b"9223372036854775807"])
def test_a_delayed_step_is_sent_past_a_planted_sequence(
        app: Minitask, admin: "redis.Redis[bytes]", planted: bytes) -> None:
    @app.task(name="add")
    def add(x: int, y: int) -> int:
        return x + y

    admin.set(K.sequence, planted)
    chain(add.s(1, 2).set(delay=60.0), add.s(3)).delay()
    delayed = [member.decode() for member in admin.zrange(K.delayed, 0, -1)]
    assert len(delayed) == 1, delayed
    assert admin.hexists(K.order, delayed[0])
    assert admin.get(K.sequence) == b"1"  # started afresh
    assert app.handle(delayed[0]).status() == "scheduled"
    # a second send takes the next number, as every later one does
    chain(add.s(4, 5).set(delay=60.0), add.s(6)).delay()
    assert admin.get(K.sequence) == b"2"
