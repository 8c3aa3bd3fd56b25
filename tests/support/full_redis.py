"""A Redis made full between a send's chunks: its first chunk written, every later write
refused out of memory. Exact where a margin over ``used_memory`` was not: on a server
shared by earlier tests, memory they had in use (a client's buffers) freed during the
send let every chunk in now and then."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Tuple
from unittest import mock

import redis

from minitask import sending


@contextmanager
def full_after_first_chunk(admin: "redis.Redis[bytes]") -> Iterator[None]:
    """Within the block, a send's chunks after its first meet a full Redis (maxmemory 1,
    noeviction); memory unlimited again after."""
    chunks = sending._Chunks.__iter__

    def made_full_after_one(self: Any) -> Iterator[Tuple[str, Any]]:
        for index, chunk in enumerate(chunks(self)):
            if index == 1:
                admin.config_set("maxmemory", 1)
            yield chunk

    admin.config_set("maxmemory-policy", "noeviction")
    try:
        with mock.patch.object(sending._Chunks, "__iter__", made_full_after_one):
            yield
    finally:
        admin.config_set("maxmemory", 0)
