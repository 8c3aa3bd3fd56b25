"""A listing of dead letters (``minitask dead list``, the dashboard's page and its
JSON) reads at most ``HEAD_BYTES`` of each letter's message and record and cuts the
arguments it shows as the other listings do: 1,500 letters of 500 kB made a 49 MB
page and a 1 GB ``dead list``. ``dead show`` and ``--json`` still read a letter whole."""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest
import redis

from minitask import Minitask
from minitask.admin import dead_rows
from minitask.admin.dead import HEAD_BYTES
from minitask.cli import dead as dead_command
from minitask.cli.main import main
from minitask.dashboard.web import Dashboard
from minitask.stores.dead import DeadLetterStore
from tests.support.draining import drain
from tests.unit.test_dashboard import call

BIG = "y" * 100_000


@pytest.fixture
def letters(make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> Minitask:
    app = make_app("shop")

    @app.task(name="shop.boom", retries=0)
    def boom(text: str, n: int = 0) -> None:
        raise ValueError(text)

    for _ in range(3):
        boom.delay(BIG)
    boom.delay("small", n=2)
    drain(app.worker(["default"]))
    return app


def test_a_row_reads_a_head_of_each_letter_and_names_what_it_cut(
        letters: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    read = []
    heads = DeadLetterStore.heads

    def spy(store: DeadLetterStore, *args: Any) -> Any:
        found = heads(store, *args)
        read.extend(len(head.body) + len(head.info) for head in found)
        return found

    monkeypatch.setattr(DeadLetterStore, "heads", spy)
    rows = dead_rows(letters, "default")
    assert len(rows) == 4 and read and max(read) <= 2 * HEAD_BYTES
    (small,) = [row for row in rows if row.letter.message == "small"]
    big = next(row for row in rows if row is not small)
    assert big.letter.name == "shop.boom" and big.letter.exc_type == "ValueError"
    assert big.args.startswith("(") and "bytes: not read here" in big.args
    assert "its message" in big.cut and "read in part" in big.cut
    assert small.letter.name == "shop.boom" and small.cut == ""
    assert small.args == "'small', n=2" and small.letter.message == "small"
    assert small.letter.reason and small.letter.attempts == 1


def test_the_page_and_its_json_stay_small(letters: Minitask) -> None:
    dashboard = Dashboard(letters)
    status, _, page = call(dashboard, "/dead")
    assert status == "200 OK" and len(page) < 30_000 and "shop.boom" in page
    status, _, body = call(dashboard, "/api/dead")
    rows = json.loads(body)["dead"]
    assert status == "200 OK" and len(body) < 30_000 and len(rows) == 4
    assert "'small', n=2" in [row["args"] for row in rows]
    assert sum(row["message"] == "small" for row in rows) == 1


def test_dead_list_reads_heads_and_says_which_it_cut_while_json_and_show_read_whole(
        letters: Minitask, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(dead_command, "load", lambda _: letters)
    monkeypatch.setattr(letters, "close", lambda: None)
    assert main(["dead", "-A", "x", "list"]) == 0
    out = capsys.readouterr().out
    assert out.count("shop.boom") == 4 and len(out) < 5_000, out
    assert (f"3 dead letter(s) read in part (their message or record is larger than "
            f"{HEAD_BYTES:,} bytes)") in out and "dead -A x show ID reads one whole" in out
    assert main(["dead", "-A", "x", "list", "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert sorted(len(d["args"][0]) for d in whole) == [5] + [len(BIG)] * 3
