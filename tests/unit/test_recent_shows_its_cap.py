"""The record of recent outcomes is trimmed about as it is written (``XADD ... MAXLEN ~``:
whole stream nodes, a third of an exact trim's Redis instructions), so Redis may hold
more entries than ``recent_outcomes``; every reader (``activity.recent``, which the CLI's
``inspect recent`` and the dashboard's pages call, and ``/api/recent``) shows each
queue's newest ``recent_outcomes`` only: the reading app's (the newest entry's field
``n``, its writer's, only where the app keeps no record: any program may write it).
Before, the record was trimmed exactly and the readers read it whole. On fakeredis
(which trims nothing with ``~``) and on the suite's redis-server."""
from __future__ import annotations

import json
import time
from typing import Callable, List

import fakeredis
import pytest

from minitask import Minitask
from minitask.admin import activity
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard
from minitask.stores.recent import pack_entry
from tests.support.draining import drain
from tests.support.pages import get

RECENT = queue_keys("shop", "default").recent


def _app(make_app: Callable[..., Minitask], cap: int) -> Minitask:
    app = make_app("shop", recent_outcomes=cap)

    @app.task(name="shop.add")
    def add(a: int, b: int) -> int:
        return a + b

    return app


def test_a_record_holding_more_than_its_cap_shows_the_newest_cap(
        make_app: Callable[..., Minitask]) -> None:
    app = _app(make_app, 3)
    handles = [app.tasks["shop.add"].delay(i, 0) for i in range(10)]
    drain(app.worker(["default"]))
    client = app.broker.client
    # ten entries of some 90 bytes: one stream node, which a trim about never drops
    assert client.xlen(RECENT) == 10
    newest = sorted(handle.id for handle in handles[-3:])
    for listing in (activity.recent(app, limit=100),
                    activity.recent(app, state="succeeded", limit=100),
                    activity.recent(app, task="shop.*", limit=100)):
        assert sorted(entry.task_id for entry in listing.tasks) == newest
        assert listing.total == 3
    shown = json.loads(get(Dashboard(app), "/api/recent")[1])
    assert sorted(task["task_id"] for task in shown["tasks"]) == newest
    assert shown["total"] == 3


def test_a_record_past_a_node_holds_a_node_more_at_most_and_shows_its_cap(
        make_app: Callable[..., Minitask]) -> None:
    app = _app(make_app, 50)
    handles = [app.tasks["shop.add"].delay(i, 0) for i in range(400)]
    drain(app.worker(["default"]))
    client = app.broker.client
    held = client.xlen(RECENT)
    most = 400 if isinstance(client, fakeredis.FakeRedis) else 50 + 100
    assert 50 <= held <= most
    listing = activity.recent(app, limit=1000)
    assert listing.total == 50
    assert sorted(entry.task_id for entry in listing.tasks) == sorted(
        handle.id for handle in handles[-50:])


def _plant(app: Minitask, caps: List[object]) -> None:
    """Entries as a writer packs them, oldest first, each with field n as given (None:
    no field n, as an older build wrote them)."""
    now_ms = int(time.time() * 1000)
    for index, cap in enumerate(caps):
        fields = {"e": pack_entry(f"t{index}", "shop.add", "succeeded", now_ms + index, 1,
                                  0.1, "w1")}
        if cap is not None:
            fields["n"] = str(cap).encode()
        app.broker.client.xadd(RECENT, fields)


@pytest.mark.parametrize("cap", [None, "0", "-1", "1.5", "nan", "inf", "x", ""])
def test_a_newest_entry_with_no_cap_a_writer_sets_leaves_the_apps(
        make_app: Callable[..., Minitask], cap: object) -> None:
    app = _app(make_app, 3)
    _plant(app, [2] * 4 + [cap])
    assert activity.recent(app, limit=100).total == 3


def test_the_apps_own_cap_is_the_one_shown(make_app: Callable[..., Minitask]) -> None:
    app = _app(make_app, 3)
    _plant(app, [5] * 6 + [2])  # a writer with recent_outcomes=2 came last (or a plant)
    listing = activity.recent(app, limit=100)
    assert sorted(entry.task_id for entry in listing.tasks) == ["t4", "t5", "t6"]
