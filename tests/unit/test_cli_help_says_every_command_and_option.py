"""``minitask --help`` and each command's ``--help`` say what every command and option
is for; ``--loglevel`` lists each level once and takes it in either case; a close
misspelling of a command gets a "did you mean" (trial34: worker, status, tasks,
schedules and bench had no description, --loglevel and --pool no help, --loglevel
listed DEBUG and debug..., and "wrk" got no suggestion where "wrker" did)."""
from __future__ import annotations

import logging
from typing import Any

import pytest

from minitask.cli.main import _parser, main
from minitask.cli.options import LOG_LEVELS, Parser, add_log_options


def test_every_command_has_a_description_and_every_option_help() -> None:
    _, commands = _parser()
    for name, parser in commands.choices.items():
        assert parser.description, f"{name} has no description"
        unhelped = [action.dest for action in parser._actions if not action.help]
        assert not unhelped, f"{name}: {unhelped} have no help"
    listed = {action.dest: action.help for action in commands._choices_actions}
    assert all(listed.get(name) for name in commands.choices), listed


def test_loglevel_lists_each_level_once(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["worker", "--help"])
    said = capsys.readouterr().out
    assert "--loglevel {DEBUG,INFO,WARNING,ERROR}" in said and "debug" not in said, said
    assert LOG_LEVELS == ("DEBUG", "INFO", "WARNING", "ERROR")


@pytest.mark.parametrize("given, level", [("debug", "DEBUG"), ("Warning", "WARNING"),
                                          ("ERROR", "ERROR")])
def test_loglevel_takes_either_case(given: str, level: str) -> None:
    parser = Parser(prog="x")
    add_log_options(parser)
    assert parser.parse_args(["--loglevel", given]).loglevel == level
    assert logging.getLevelName(level) in (10, 30, 40)


def test_a_mistyped_loglevel_is_refused_with_the_closest(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["status", "-A", "nosuch.app", "--loglevel", "infp"])
    assert exited.value.code == 2
    assert "did you mean 'INFO'?" in capsys.readouterr().err


@pytest.mark.parametrize("word, meant", [("wrk", "worker"), ("wrker", "worker"),
                                         ("sched", "schedules"), ("dashbord", "dashboard"),
                                         ("stauts", "status"), ("unsub", "unsubscribe")])
def test_a_close_misspelling_of_a_command_gets_a_did_you_mean(
        word: str, meant: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([word])
    said = capsys.readouterr().err
    assert exited.value.code == 2
    assert f"unknown command {word!r}; did you mean {meant!r}?" in said, said


@pytest.mark.parametrize("word", ["s", "xyz", "run", "stop"])
def test_a_word_close_to_no_command_gets_none(word: str,
                                              capsys: pytest.CaptureFixture[Any]) -> None:
    with pytest.raises(SystemExit):
        main([word])
    said = capsys.readouterr().err
    assert f"unknown command {word!r} (commands: worker, " in said, said
