"""A word one edit away from an option of another command (``cancel --al``, a typo of
``dead``'s and ``shutdown``'s ``--all``) is refused with a "did you mean" as other
mistyped options are (issue 29, probe29p LOW): it was read as a task id and answered
"not cancelled, it is unknown". Ids that start with '-' keep working, and after
``--`` any word is an id. On the suite's redis-server."""
from __future__ import annotations

import pytest

from minitask import Minitask
from minitask.cli import cancel
from tests.support.cli import operate_with, run
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.fixture
def app(redis_server: RedisServer, admin: object,
        monkeypatch: pytest.MonkeyPatch) -> Minitask:
    app = Minitask("typos", broker=redis_server.url)

    @app.task(name="later")
    def later() -> None:
        pass

    return operate_with(app, monkeypatch, cancel)


@pytest.mark.parametrize("word, meant", [("--al", "--all"), ("--alll", "--all"),
                                         ("--wai", "--wait"), ("--yse", "--yes")])
def test_a_typo_of_another_command_s_option_is_refused_with_what_was_meant(
        app: Minitask, capsys: pytest.CaptureFixture[str], word: str, meant: str) -> None:
    handle = app.tasks["later"].apply_async(task_id=word, delay=3600)
    with pytest.raises(SystemExit) as stopped:
        run(capsys, "cancel", "-A", "typos", word)
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert f"no option {word}; did you mean {meant}? That is an option of another " \
           f"command, not of minitask cancel" in said, said
    assert "an id that starts with '-' goes after --" in said
    assert handle.status() == "scheduled"  # nothing ran
    # the way it names: after --, the word is an id
    code, out = run(capsys, "cancel", "-A", "typos", "--", word)
    assert (code, out) == (0, f"{word}: cancelled\n")
    assert handle.status() == "cancelled"


def test_ids_that_start_with_a_dash_still_work(
        app: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    handle = app.tasks["later"].apply_async(task_id="-al3Xk9qZ", delay=3600)
    code, out = run(capsys, "cancel", "-A", "typos", "-al3Xk9qZ")
    assert (code, out) == (0, "-al3Xk9qZ: cancelled\n")
    assert handle.status() == "cancelled"
