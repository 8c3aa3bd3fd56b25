"""A word one edit away from an option of the command, or an option of another
command, is a mistyped option, not a task id: the command line is refused with a
"did you mean", and nothing runs. Ids that start with '-' keep working."""
from __future__ import annotations

import argparse
from typing import List

import pytest

from minitask.cli.main import _parser, _with_words
from minitask.cli.options import _one_edit_apart


def parse(argv: List[str]) -> argparse.Namespace:
    parser, commands = _parser()
    args = parser.parse_args(_with_words(commands, argv))
    args.words = getattr(args, "pending_words", getattr(args, "words", None))
    return args


@pytest.mark.parametrize("argv, says", [
    (["inspect", "-A", "shop.tasks", "--jsn", "abc"], "did you mean --json?"),
    (["inspect", "-A", "shop.tasks", "abc", "--josn"], "did you mean --json?"),
    (["dead", "-A", "shop.tasks", "list", "--queu", "emails"], "did you mean --queue?"),
    (["cancel", "-A", "shop.tasks", "--all"], "--all is an option of another command"),
    (["inspect", "-A", "shop.tasks", "--wait", "abc"], "--wait is an option of another"),
])
def test_a_mistyped_option_is_refused_with_what_was_meant(
        argv: List[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse(argv)
    assert stopped.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("word", ["--jsn", "--all", "-Xk3abcdefghijklmnopq",
                                  "--Xk3abcdefghijklmnop"])
def test_after_a_double_dash_every_word_is_an_id(word: str) -> None:
    args = parse(["cancel", "-A", "shop.tasks", "--json", "--", word])
    assert args.words == [word] and args.json is True


def test_an_option_value_that_looks_like_an_option_is_a_value() -> None:
    args = parse(["dead", "-A", "shop.tasks", "list", "--queue", "--all"])
    assert args.queue == "--all" and args.words == ["list"]


@pytest.mark.parametrize("word, option, apart", [
    ("--jsn", "--json", True), ("--jsonn", "--json", True), ("--josn", "--json", True),
    ("--jaon", "--json", True), ("--json", "--json", False), ("--js", "--json", False),
    ("--queue", "--json", False), ("--Xk3abcdefghijklmnop", "--json", False)])
def test_one_edit_apart(word: str, option: str, apart: bool) -> None:
    assert _one_edit_apart(word, option) is apart
