"""Closing: an app (and its broker) lets go of every connection it opened."""
from __future__ import annotations

import threading
from typing import Any, List

import pytest

from minitask import Minitask
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def connections_named(admin: Any, name: str) -> List[Any]:
    return [c for c in admin.client_list() if c.get("name") == name]


def test_close_closes_the_connections_of_every_thread_and_the_pool(
        redis_server: RedisServer, admin: Any) -> None:
    client = redis_server.client(client_name="minitask-close-test")
    app = Minitask("closing", broker=client)

    @app.task
    def job(n: int) -> int:
        return n

    job.delay(0)  # this thread's packed-call connection
    # The other thread stays alive until the end: a finished thread's connection goes
    # with it whenever the garbage collector gets to it (it did, now and then, in a
    # full run), and close() must reach a live thread's.
    sent, released = threading.Event(), threading.Event()

    def send_and_stay() -> None:
        job.delay(1)
        sent.set()
        released.wait(30)

    thread = threading.Thread(target=send_and_stay)
    thread.start()
    try:
        assert sent.wait(30)
        app.broker.queues.counts("default")  # a pooled connection
        assert len(connections_named(admin, "minitask-close-test")) >= 3
        app.close()
        # the server notices a closed socket on its own schedule: wait for it, briefly
        wait_until(lambda: connections_named(admin, "minitask-close-test") == [],
                   timeout=5, message="the server to see every connection closed")
    finally:
        released.set()
        thread.join(30)
    job.delay(2)  # the app connects again on next use
    assert app.broker.queues.counts("default")["ready"] == 3
    app.close()
    app.close()  # closing twice is harmless
