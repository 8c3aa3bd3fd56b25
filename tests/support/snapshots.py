"""Whether a call left Redis as it was: every key with its full content, compared."""
from __future__ import annotations

from typing import Any, Callable, Dict

import pytest


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


def refused(fake_redis: Any, error: type, call: Callable[[], Any], *words: str) -> BaseException:
    """``call()`` raises ``error`` whose message holds ``words``; Redis is unchanged."""
    before = snapshot(fake_redis)
    with pytest.raises(error) as caught:
        call()
    for word in words:
        assert word in str(caught.value), str(caught.value)
    assert snapshot(fake_redis) == before
    return caught.value
