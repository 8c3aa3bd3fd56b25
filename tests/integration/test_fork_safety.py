"""A process pool forks its children while other threads use Redis: a child must
never inherit the client pool's lock held (it would wait for it for ever)."""
from __future__ import annotations

import os
import threading
import time

import pytest
import redis

from minitask.broker.transport import Transport
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() with threads, on purpose
def test_a_child_forked_while_another_thread_holds_the_pool_lock_can_use_redis(
        redis_server: RedisServer) -> None:
    transport = Transport(redis.Redis(port=redis_server.port))
    transport.client.ping()  # the pool exists, as in a supervisor that has run
    lock = transport.client.connection_pool._lock
    holding = threading.Event()

    def hold() -> None:  # a heartbeat or listener thread, in the middle of a call
        with lock:
            holding.set()
            time.sleep(0.3)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    with transport.connections.forking():  # waits for the holder, then forks with the lock held
        pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            transport.connections.forked()
            code = 0 if transport.client.ping() else 1
        finally:
            os._exit(code)
    holder.join(timeout=10)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child could not use Redis within 20 s: it inherited the lock held")
