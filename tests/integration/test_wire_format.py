"""A producer in another language: only the commands the docs document (wire-format.rst)."""
from __future__ import annotations

import importlib.resources
from typing import Any, Callable, List

import msgpack

from minitask import Minitask


def _documented_enqueue_script() -> bytes:
    folder = importlib.resources.files("minitask.stores") / "lua"
    return b"".join((folder / name).read_bytes() for name in ("lib.lua", "promote.lua",
                                                              "enqueue.lua"))


def test_task_enqueued_with_the_documented_commands_runs_and_its_result_is_readable(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    app = make_app("shop")
    sold: List[Any] = []

    @app.task(name="emails.item_sold", queue="emails")
    def item_sold(order: int, item: str, email: str) -> str:
        sold.append((order, item, email))
        return f"mailed {email}"

    now = clock.now_ms()
    body = msgpack.packb({"v": 1, "id": "order-1001-sold", "task": "emails.item_sold",
                          "args": [1001, "brass lamp", "bob@example.com"], "kwargs": {},
                          "queue": "emails", "priority": 5, "enqueued_at_ms": now,
                          "eta_ms": None, "attempt": 1}, use_bin_type=True)
    queue = "minitask:{shop:emails}"
    ready = [f"{queue}:ready:{priority}" for priority in range(9, -1, -1)]
    keys = [f"{queue}:messages", f"{queue}:delayed", f"{queue}:wake", *ready,
            f"{queue}:order", f"{queue}:sequence", f"{queue}:result:order-1001-sold"]
    sha = redis_client.script_load(_documented_enqueue_script())
    added = redis_client.evalsha(sha, len(keys), *keys, now, 256, 1000,
                                 "order-1001-sold", body, 5, 0)
    redis_client.sadd("minitask:{shop}:queues", "emails")

    assert added == 1
    handle = app.handle("order-1001-sold")
    assert handle.status() == "queued"
    app.worker(queues=["emails"], burst=True).run()
    assert sold == [(1001, "brass lamp", "bob@example.com")]
    assert handle.get(timeout=5) == "mailed bob@example.com"
    outcome = msgpack.unpackb(redis_client.lindex(f"{queue}:result:order-1001-sold", 0),
                              raw=False)
    assert (outcome["v"], outcome["status"], outcome["value"]) == (1, "succeeded",
                                                                   "mailed bob@example.com")
