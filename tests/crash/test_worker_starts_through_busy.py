"""A worker that meets Redis BUSY (a slow script holds the server) while it starts
waits it out with backoff, as a running worker does, then serves its queue (issue 29,
probe 29f's L4), on every pool, on a real redis-server.

Before, it exited 1 at once: "could not register queues" (or whichever start-up step
met BUSY first).
"""
from __future__ import annotations

import threading

import pytest
import redis

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

#: A script that holds Redis for ``ARGV[1]`` seconds of the server's clock.
SLOW = """
local start = redis.call('TIME')
while true do
  local now = redis.call('TIME')
  if (now[1] - start[1]) * 1000000 + (now[2] - start[2]) > ARGV[1] * 1000000 then break end
end
return 1
"""
HOLD_S = 6


def busy(client: "redis.Redis[bytes]") -> bool:
    try:
        client.ping()
    except redis.ResponseError as exc:
        return str(exc).startswith("BUSY")
    return False


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_a_worker_started_while_redis_is_busy_waits_it_out(kit: Kit, pool: str) -> None:
    kit.client.config_set("lua-time-limit", 100)  # BUSY replies after 0.1 s of a script
    holder = redis.Redis.from_url(kit.server.url)

    def hold() -> None:
        try:
            holder.eval(SLOW, 0, HOLD_S)
        except redis.RedisError:  # (a client's read timeout: the script runs on)
            pass

    slow = threading.Thread(target=hold, daemon=True)
    slow.start()
    try:
        wait_until(lambda: busy(kit.client), timeout=DEADLINE, message="Redis busy")
        worker = kit.worker("--pool", pool, "-c", "1")
        log = kit.logs / "worker-0.log"
        wait_until(lambda: "BUSY" in log.read_text(errors="replace") or worker.poll() is not None,
                   timeout=DEADLINE, message="the worker meeting BUSY")
        wait_until(lambda: not busy(kit.client), timeout=DEADLINE, message="Redis free")
        assert kit.tasks.record.delay("after").get(timeout=DEADLINE) == "after"
        assert worker.poll() is None, log.read_text(errors="replace")[-3000:]
        said = log.read_text(errors="replace")
        assert "BUSY" in said and "retrying with backoff" in said, said[-3000:]
    finally:
        wait_until(lambda: not busy(kit.client), timeout=DEADLINE, message="Redis free")
        slow.join(timeout=DEADLINE)
        holder.close()
