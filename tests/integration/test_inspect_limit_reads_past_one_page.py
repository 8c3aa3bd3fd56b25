"""``minitask inspect --limit N`` takes 1 to 100,000 (docs/reference/cli.rst), and a
listing of running or scheduled tasks without a filter shows up to N of them: each
queue is read 1,000 tasks a script call (peek.lua), never more in one call. Before,
every queue was read in one call capped at 1,000: ``inspect scheduled --limit 2500``
showed 1,000 of a queue's 1,800 tasks."""
from __future__ import annotations

import json
import time
from typing import Any, List

import pytest

from minitask import Minitask
from minitask.admin import activity
from minitask.cli import inspect as inspect_command
from minitask.stores.admin import PEEK_MOST

from tests.support.cli import operate_with, run

pytestmark = [pytest.mark.integration, pytest.mark.app("pages", on="server")]

#: Tasks scheduled on each queue: past one page on both.
SENT = {"default": 1_800, "other": 1_200}


@pytest.fixture
def sent(app: Minitask) -> List[str]:
    """The ids of SENT tasks, due an hour on and one second apart, in due order (at
    times fixed before the first send: a delay counts from each send, and 3,000 sends
    on a loaded machine took long enough to reorder them)."""
    later = app.task(name="t.later")(lambda x: x)
    start = time.time() + 3600
    handles = []
    for queue, count in SENT.items():
        for index in range(count):
            # the queues interleave: queue 0 due at 3600, 3602, ...; queue 1 at 3601, ...
            due = 2 * index + (queue == "other")
            handles.append((due, later.apply_async((index,), queue=queue,
                                                   eta=start + due).id))
    return [task_id for _, task_id in sorted(handles)]


def test_scheduled_listing_shows_its_limit_past_one_page(
        app: Minitask, sent: List[str], monkeypatch: pytest.MonkeyPatch) -> None:
    asked: List[int] = []
    real_run = app.broker.transport.run

    def counted(name: str, keys: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
        if name == "peek":
            asked.append(int(args[0]))
        return real_run(name, keys, args, *rest, **kwargs)

    monkeypatch.setattr(app.broker.transport, "run", counted)
    listing = activity.scheduled(app, limit=2_500)
    assert listing.total == 3_000
    assert [item.task_id for item in listing.tasks] == sent[:2_500]
    # a page at most in one call: two calls for each queue
    assert len(asked) == 4 and max(asked) <= PEEK_MOST


def test_inspect_scheduled_json_lists_as_many_as_its_limit(
        app: Minitask, sent: List[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    operate_with(app, monkeypatch, inspect_command)
    code, out = run(capsys, "inspect", "-A", "pages", "scheduled", "--json",
                    "--limit", "100000")
    assert code == 0, out
    listed = json.loads(out)
    assert listed["total"] == 3_000
    assert [item["task_id"] for item in listed["tasks"]] == sent
