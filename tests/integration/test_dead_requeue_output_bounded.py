"""``minitask dead requeue --all --yes`` over many letters it cannot requeue (issue 29,
L2), on a real redis-server: 8,000 dead letters whose message is gone printed 8,000
lines (0.7 MB; 300,000 ran past a minute saying nothing). The text output is a summary
with at most SHOWN_MOST letters and a count by reason, ``--json`` lists each, and a
long run says how far it is on stderr. ``dead purge`` of many unknown ids likewise."""
from __future__ import annotations

import json
from typing import Iterator, Tuple

import pytest

import tests.apps.basic as basic
from minitask.broker.keys import QueueKeys
from minitask.cli import dead as dead_command
from minitask.cli import main
from tests.support.servers import RedisServer, module_app_on

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

APP = "tests.apps.basic"
QUEUE = QueueKeys("basic", "default")
GHOSTS = 2_500
#: Letters the text output names at most (cli/dead.py SHOWN_MOST)
SHOWN = 20


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with module_app_on(redis_server, monkeypatch, basic.app) as served:
        yield served


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def ghosts(redis_server: RedisServer) -> None:
    """GHOSTS dead letters whose message is gone (no minitask wrote them)."""
    client = redis_server.client()
    client.zadd(QUEUE.dead, {f"ghost{i:05d}": 1 + i for i in range(GHOSTS)})
    client.close()


def test_requeue_all_of_many_ghost_letters_says_a_summary_and_its_progress(
        url: str, redis_server: RedisServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ghosts(redis_server)
    # a progress line after each chunk
    monkeypatch.setattr(dead_command, "PROGRESS_SECONDS", 0.0, raising=False)
    code, out, err = cli(capsys, "dead", "-A", APP, "requeue", "--all", "--yes")
    assert code == 1
    lines = out.splitlines()
    assert len(lines) <= SHOWN + 5 and len(out) < 5_000, out[:300]
    assert getattr(dead_command, "SHOWN_MOST", None) == SHOWN
    assert lines[0] == "requeued 0 dead letter(s)"
    assert f"{GHOSTS - SHOWN:,} more dead letter(s) not requeued" in out
    assert f"{GHOSTS:,} in all" in out and f"  {GHOSTS:,}: " in out, out
    assert "dead letter 'ghost00000' is not requeued" in out
    progress = [line for line in err.splitlines() if line.startswith("dead requeue: ")]
    assert progress and f"of {GHOSTS:,} dead letter(s) looked at" in progress[0], err
    assert len(progress) <= GHOSTS // dead_command.BULK_CHUNK + 1


def test_requeue_all_json_lists_each_letter(
        url: str, redis_server: RedisServer, capsys: pytest.CaptureFixture[str]) -> None:
    ghosts(redis_server)
    code, out, _ = cli(capsys, "dead", "-A", APP, "requeue", "--all", "--yes", "--json")
    data = json.loads(out)
    assert code == 1 and data["requeued"] == 0
    assert len(data["not_requeued"]) == GHOSTS


def test_purge_and_requeue_of_many_unknown_ids_say_a_bounded_summary(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    ids = [f"nosuch{i}" for i in range(300)]
    for action in ("purge", "requeue"):
        code, out, _ = cli(capsys, "dead", "-A", APP, action, *ids)
        assert code == 1
        assert len(out.splitlines()) <= SHOWN + 3, out
        assert f"{300 - SHOWN:,} more id(s) no dead letter has" in out
