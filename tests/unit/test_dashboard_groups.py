"""The dashboard's fair-queue page (``/section/groups``, guide/fair-queues "Seeing
groups"): each queue's count of groups and its largest backlogs by group, bounded,
with every group name escaped, those planted in Redis by another hand included."""
from __future__ import annotations

import json
from typing import Callable

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.dashboard.groups import LARGEST
from minitask.dashboard.web import Dashboard
from tests.unit.test_dashboard import call

SCRIPT = "<script>alert(1)</script>"


def test_the_groups_page_lists_the_largest_backlogs_of_each_queue_escaped(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")

    @app.task(group_by="tenant")
    def job(tenant: str, n: int) -> None: ...

    @app.task(queue="other")
    def plain(n: int) -> None: ...

    for size in range(1, 31):  # 30 groups, tenant tN holding N ready tasks
        job.delay_many([(f"t{size}", n) for n in range(size)])
    job.apply_async((SCRIPT, 1), group=SCRIPT)
    plain.delay(1)
    # names no minitask wrote: a terminal escape, a bidi override, bytes that are no UTF-8
    groups_key = QueueKeys("shop", "default").groups
    app.broker.transport.client.zadd(groups_key, {b"\x1b[2Jwiped\xe2\x80\xae\xff": 1000})
    dashboard = Dashboard(app)
    status, _, page = call(dashboard, "/section/groups")
    assert status == "200 OK"
    assert 'href="/section/groups"' in call(dashboard, "/")[2]  # in the menu
    assert SCRIPT not in page and "&lt;script&gt;" not in page  # not among the largest
    assert "\x1b" not in page and "\u202e" not in page and "\\x1b[2Jwiped\\u202e\\xff" in page
    rows = json.loads(call(dashboard, "/api/section/groups")[2])["rows"]
    assert len(rows) == LARGEST  # bounded: the queue's largest backlogs only
    # the API keeps the name as Redis holds it (bytes that are no UTF-8 aside)
    assert [row["group"] for row in rows[:3]] == ["\x1b[2Jwiped\u202e\\xff", "t30", "t29"]
    assert {(row["queue"], row["groups"]) for row in rows} == {("default", 32)}
    assert rows[1]["ready"] == 30 and rows[1]["grouped ready"] == sum(range(1, 31)) + 1


def test_a_group_name_holding_markup_is_shown_as_text(make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")

    @app.task
    def job(n: int) -> None: ...

    job.apply_async((1,), group=SCRIPT)
    page = call(Dashboard(app), "/section/groups")[2]
    assert SCRIPT not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_no_fair_queue_no_rows(make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")
    assert json.loads(call(Dashboard(app), "/api/section/groups")[2])["rows"] == []
