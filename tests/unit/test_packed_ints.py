"""A script call's small ints are packed once and kept (``packing.int_bulk``): the
bytes stay what redis-py sends, whatever the value, and only small ones are kept,
so that timestamps or ids passed as ints cannot fill the store."""
from __future__ import annotations

import hashlib
import random

import redis

from minitask.broker import packing
from minitask.broker.packing import PackedScript, int_bulk


def test_ints_of_every_size_pack_as_redis_py_packs_them() -> None:
    rng = random.Random(36)
    keys = ["minitask:{app:q}:leases"]
    script = PackedScript("s", "return 1", keys)
    sha = hashlib.sha1(b"return 1").hexdigest()
    for _ in range(300):
        tail = [rng.choice([rng.randrange(-5, 300), rng.randrange(-10 ** 15, 10 ** 15),
                            packing.SMALL_INT + rng.randrange(3), b"x" * rng.randrange(300),
                            "y" * rng.randrange(3)]) for _ in range(rng.randrange(140))]
        dynamic = rng.randrange(3)
        expected = b"".join(redis.Connection().pack_command(
            "EVALSHA", sha, len(keys) + dynamic, *keys, *tail))
        assert script.pack(tail, dynamic) == expected
        # packed again, now from what was kept: the same bytes
        assert script.pack(tail, dynamic) == expected


def test_only_small_ints_are_kept() -> None:
    int_bulk(1_764_000_000_000)  # a timestamp in ms
    int_bulk(-1)
    int_bulk(packing.SMALL_INT)
    int_bulk(30_000)
    kept = packing._INT_BULKS
    assert 30_000 in kept and kept[30_000] == b"$5\r\n30000\r\n"
    assert not {1_764_000_000_000, -1, packing.SMALL_INT} & set(kept)
    assert len(kept) <= packing._KEPT_MOST
