"""JSON output (``--json``, JSON log lines) writes every character that is not
printable (a bidi control such as U+202E, an escape, DEL, C1, a line separator,
a lone surrogate) as its JSON escape: the same JSON to a parser, and nothing that
moves or rewrites what a terminal shows; ``inspect ID --json`` wrote U+202E raw."""
from __future__ import annotations

import json
import logging

import pytest

from minitask import Minitask
from minitask.cli import inspect
from minitask.cli.logs import JsonFormatter
from minitask.cli.options import emit_json
from minitask.printable import json_safe
from tests.support.cli import operate_with, run

CONTROLS = "a\u202eb\x1b[31m\x7f\x85\u2028\u2066\udc80"


def _raw_controls(text: str) -> set[str]:
    return {char for char in text if not char.isprintable() and char != "\n"}


def test_json_safe_escapes_what_is_not_printable_and_keeps_the_rest() -> None:
    for value in (CONTROLS, "caf\u00e9 \u6f22\u5b57 \U0001f600", "plain", "tab\there"):
        text = json_safe(json.dumps({"v": value}, indent=2, ensure_ascii=False))
        assert json.loads(text) == {"v": value}
        assert _raw_controls(text) == set()
    assert "caf\u00e9 \u6f22\u5b57 \U0001f600" in json_safe(
        json.dumps("caf\u00e9 \u6f22\u5b57 \U0001f600", ensure_ascii=False))
    assert json_safe(json.dumps("\u202e", ensure_ascii=False)) == '"\\u202e"'


def test_emit_json_and_json_log_lines_escape_controls(
        capsys: pytest.CaptureFixture[str]) -> None:
    emit_json({"message": CONTROLS})
    out = capsys.readouterr().out
    assert _raw_controls(out) == set() and json.loads(out) == {"message": CONTROLS}
    record = logging.LogRecord("minitask", logging.INFO, __file__, 1, "said %s", (CONTROLS,),
                               None)
    line = JsonFormatter().format(record)
    assert _raw_controls(line) == set() and json.loads(line)["message"] == f"said {CONTROLS}"


def test_inspect_an_id_as_json_writes_no_bidi_control_raw(
        app: Minitask, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    @app.task(name="greet")
    def greet(who: str) -> str:
        return who

    handle = greet.delay("evil\u202etxt.exe")
    operate_with(app, monkeypatch, inspect)
    code, out = run(capsys, "inspect", "-A", "app", handle.id, "--json")
    assert code == 0, out
    assert "\u202e" not in out and "\\u202e" in out
    assert "evil\u202etxt.exe" in json.dumps(json.loads(out), ensure_ascii=False)
