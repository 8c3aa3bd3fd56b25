"""A real worker's text log, and ``dead show`` / ``inspect ID`` of what it recorded,
have no line that an exception's own texts forged ("2026-... ERROR ..."): a note, a
chained cause whose message ends in an indented line, a SyntaxError's file name. Python
yields a note's lines as lines of their own, and the worker escaped each of those
alone, so the line break between them stayed (probe 21, issue 29, M2 and M3)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Tuple

import pytest

import tests.apps.forged_lines as forged_app
from minitask.cli import main
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer, module_app_on

pytestmark = pytest.mark.integration

APP = "tests.apps.forged_lines"
FORGED = forged_app.FORGED


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with module_app_on(redis_server, monkeypatch, forged_app.app) as served:
        yield served


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("pool", ["thread", "process", "asyncio"])
def test_no_exception_text_forges_a_line_of_the_log_or_of_dead_show(
        pool: str, url: str, processes: Processes, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    handles = [forged_app.noted.delay(), forged_app.chained.delay(), forged_app.syntax.delay()]
    log = tmp_path / "worker.log"
    worker = processes.worker(APP, "--pool", pool, "--burst", env={"MINITASK_BROKER_URL": url},
                              log=log)
    assert exit_code(worker) == 0
    text = log.read_bytes().decode("utf-8", "replace")
    assert "by a note with no line break" in text, text  # the notes were logged
    assert "by a file name" in text and "by a cause" in text, text
    lines = text.splitlines()
    assert not [line for line in lines if line.startswith(FORGED)], text
    assert "\x1b" not in text and "\r" not in text, text
    for handle in handles:
        for argv in (("dead", "show", handle.id), ("inspect", handle.id)):
            code, out = _cli(capsys, argv[0], "-A", APP, *argv[1:])
            assert code == 0, out
            assert "Traceback (most recent call last):" in out.splitlines(), out
            assert not [line for line in out.splitlines() if line.startswith(FORGED)], out
