"""What an operator reads about a name or a queue is true (probe 13 L3):

* a bad worker name (``--name "a b"``, ``app.worker(name=...)``) is refused as a
  *worker* name, not a "subscriber" one; a bad ``-Q`` queue is refused before any
  warning that would serve it "anyway";
* an id longer than any task or group can have (``wire.message.MAX_ID_BYTES``) is
  refused by ``app.handle``/``app.group_handle`` naming that cap, not said "unknown";
* ``purge_dead``/``dead_letters`` of a queue the app does not have raise, naming it,
  instead of "0 purged"; a queue past the first 1,000 of the registry is still one."""
from __future__ import annotations

import logging
from typing import Iterator

import pytest

from minitask import ConfigurationError, Minitask
from minitask.broker.keys import AppKeys
from minitask.cli import dead as dead_command
from minitask.cli import inspect as inspect_command
from minitask.cli import purge as purge_command
from minitask.cli import unsubscribe as unsubscribe_command
from minitask.cli import worker as worker_command
from minitask.dashboard.actions import Refused, checked_queue
from minitask.wire.message import MAX_ID_BYTES

from tests.support.cli import operate_with, run


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    app.task(name="t.add")(lambda x, y: x + y)
    yield operate_with(app, monkeypatch, dead_command, inspect_command, purge_command,
                       unsubscribe_command, worker_command)


@pytest.mark.parametrize("name", ["a b", "a:b", "{a}", "", "x" * 301])
def test_a_bad_worker_name_is_called_a_worker_name(
        operated: Minitask, capsys: pytest.CaptureFixture[str], name: str) -> None:
    # --name is the worker's subscriber's name too: checked as one, called the worker's
    code, text = run(capsys, "worker", "-A", "x", "--name", name, "--burst")
    assert code == 2 and "worker name" in text and "subscriber" not in text, text


@pytest.mark.parametrize("name", ["x" * 301, "a\x1b[31m", "a\u202eb", b"ab"])
def test_a_name_the_api_cannot_show_is_refused_as_a_worker_name(
        operated: Minitask, name: object) -> None:
    with pytest.raises(ConfigurationError, match="worker name") as caught:
        operated.worker(name=name)  # type: ignore[arg-type]
    assert "subscriber" not in str(caught.value)


@pytest.mark.parametrize("name", ["web 1", "node:1", "{a}"])
def test_the_api_takes_any_printable_worker_name_a_name_is_only_shown(
        operated: Minitask, name: str) -> None:
    assert operated.worker(name=name).name == name
    worker = operated.worker(name="")
    assert worker.name == worker.id


def test_a_bad_queue_name_is_refused_before_a_warning_that_serves_it(
        operated: Minitask, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        code, text = run(capsys, "worker", "-A", "x", "-Q", "a b", "--burst")
    assert code == 2 and "queue name 'a b'" in text, text
    assert not any("anyway" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("size", [MAX_ID_BYTES + 1, 10_000])
def test_an_id_longer_than_any_is_refused_naming_the_cap(app: Minitask, size: int) -> None:
    for rebuild, what in ((app.group_handle, "group_id"), (app.handle, "task_id")):
        with pytest.raises(ConfigurationError) as caught:
            rebuild("g" * size)
        text = str(caught.value)
        assert f"{what} " in text and f"is {size:,} bytes" in text, text
        assert f"longer than {MAX_ID_BYTES} bytes" in text and "MAX_ID_BYTES" in text, text
        assert "unknown" not in text and len(text) < 400, text


def test_an_id_of_the_cap_is_still_looked_up(app: Minitask) -> None:
    with pytest.raises(ConfigurationError, match="is unknown on"):
        app.group_handle("g" * MAX_ID_BYTES)
    assert app.handle("g" * MAX_ID_BYTES).status() == "unknown"


@pytest.mark.parametrize("queue", ["nosuch", "defualt"])
def test_dead_letters_of_a_queue_the_app_has_not_are_refused_naming_it(
        operated: Minitask, queue: str) -> None:
    for act in (lambda: operated.purge_dead(queue=queue),
                lambda: operated.purge_dead("some-id", queue=queue),
                lambda: operated.dead_letters(queue=queue)):
        with pytest.raises(ConfigurationError) as caught:
            act()
        text = str(caught.value)
        assert f"has no queue {queue!r}" in text and "its queues: default" in text, text
    assert operated.purge_dead(queue="default") == 0
    assert operated.dead_letters(queue="default") == []


def test_a_bad_queue_name_is_refused_as_one(operated: Minitask) -> None:
    for queue in ("a b", "{x}", ""):
        with pytest.raises(ConfigurationError, match="queue name"):
            operated.purge_dead(queue=queue)


def test_a_broadcast_lane_and_a_queue_past_the_first_thousand_are_known(
        operated: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    keys = AppKeys(operated.name)
    client = operated.broker.client
    client.sadd(keys.queues, *[f"q{n:05d}" for n in range(1_500)])
    client.sadd(keys.lanes, b"news:host1")
    assert operated.purge_dead(queue="q01499") == 0
    assert operated.purge_dead(queue="news:host1") == 0
    code, text = run(capsys, "dead", "-A", "x", "list", "--queue", "q01499")
    assert code == 0 and "no dead letters" in text, text
    code, text = run(capsys, "purge", "-A", "x", "q01499", "--yes")
    assert code == 0 and "deleted 0 ready task(s)" in text, text
    code, text = run(capsys, "dead", "-A", "x", "purge", "--all", "--yes", "--queue", "nosuch")
    assert code == 1 and "has no queue 'nosuch'" in text and " more" in text, text
    assert len(text) < 2_000, text


def test_unsubscribe_from_a_queue_the_app_has_not_says_so(
        operated: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run(capsys, "unsubscribe", "-A", "x", "nosuch", "host1")
    assert code == 1 and "has no queue 'nosuch'" in text, text
    assert "not a subscriber" not in text, text
    code, text = run(capsys, "unsubscribe", "-A", "x", "default", "host1")
    assert code == 1 and "host1 is not a subscriber of queue default" in text, text


def test_inspect_of_an_id_longer_than_any_says_why_it_is_unknown(
        operated: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    for words in ([], ["workflow"]):
        code, text = run(capsys, "inspect", "-A", "x", *words, "i" * (MAX_ID_BYTES + 1))
        assert code == 1 and f"an id of {MAX_ID_BYTES + 1:,} bytes" in text, text
        assert f"the most is {MAX_ID_BYTES} (wire.message.MAX_ID_BYTES)" in text, text
        code, text = run(capsys, "inspect", "-A", "x", *words, "i" * MAX_ID_BYTES)
        assert code == 1 and "MAX_ID_BYTES" not in text, text


def test_the_dashboards_actions_know_the_queues_the_cli_knows(operated: Minitask) -> None:
    # the dashboard's own check read the first 1,000 registry names only (review 13)
    client = operated.broker.client
    client.sadd(AppKeys(operated.name).queues, *[f"q{n:05d}" for n in range(1_500)])
    client.sadd(AppKeys(operated.name).lanes, b"news:host1")
    assert checked_queue(operated, "q01499") == "q01499"
    assert checked_queue(operated, "news:host1") == "news:host1"
    with pytest.raises(Refused, match="has no queue 'nosuch'"):
        checked_queue(operated, "nosuch")
    with pytest.raises(Refused, match="queue name"):
        checked_queue(operated, "a b")
