"""A result as long as ``max_result_bytes`` allows reads back, on a real redis-server:
the result key is measured (MEMORY USAGE) before it is read, and that counts the
allocator's block (a quarter more, rounded up to a size class), so a result of about
1 MiB measured 1.3 MB and was called too large (status "failed", get() raising
DecodeError) by a bound on its length (issue 29, review of the bounded reads)."""
from __future__ import annotations

import asyncio

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server")]

#: Just under the default max_result_bytes (1 MiB) once packed with its record.
LONG = 1_048_460


def test_a_result_at_the_cap_is_succeeded_and_read_whole(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    @app.task()
    def long_text() -> str:
        return "x" * LONG

    handle = long_text.delay()
    assert app.worker(burst=True).run_once()
    measured = admin.memory_usage(queue_keys(app.name, "default").result(handle.id))
    # measured past its bound (the cap and 64 kB of room): what misled the reads
    assert measured is not None and measured > app.max_result_bytes + 65_536
    assert handle.status() == "succeeded"
    assert handle.get(timeout=5) == "x" * LONG

    async def read() -> str:
        try:
            assert await handle.astatus() == "succeeded"
            return await handle.aget(timeout=5)  # type: ignore[no-any-return]
        finally:
            await app.aclose()

    assert asyncio.run(read()) == "x" * LONG


def test_a_planted_result_far_past_the_cap_is_still_not_read(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    @app.task()
    def short() -> str:
        return "ok"

    handle = short.delay()
    assert app.worker(burst=True).run_once()
    key = queue_keys(app.name, "default").result(handle.id)
    admin.delete(key)
    admin.rpush(key, b"\x00" * (3 * app.max_result_bytes))
    before = int(admin.info("stats")["total_net_output_bytes"])
    assert handle.status() == "failed"
    assert int(admin.info("stats")["total_net_output_bytes"]) - before < 100_000
