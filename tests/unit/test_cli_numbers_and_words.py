"""Every numeric option of every command takes a bounded range: a number out of it
(huge, negative, nan, inf) is a bad command line (exit 2, naming the option and the
range), never an outage (exit 3) nor a traceback. A word that is not one of a fixed
set (a listing, an action, a command, a choice) gets a "did you mean"."""
from __future__ import annotations

import argparse
from typing import Any, Iterator, List, Tuple

import pytest

from minitask import Minitask
from minitask.admin.activity import LIMIT_MOST, recent, running, scheduled
from minitask.cli import dead, inspect as inspect_command, purge
from minitask.cli.main import _parser, main
from minitask.cli.options import Bounded
from minitask.errors import ConfigurationError

HOSTILE = ["99999999999999999999", "-1", "-99999999999999999999", "nan", "inf", "-inf",
           "1e400", "1e308", "0x10", "ten", "",
           # what Python's int() and float() read as 10 all the same
           "\u0661\u0660", "\uff11\uff10", "1_0", " 10", "10\n"]


def numeric_options() -> Iterator[Tuple[str, str, Bounded]]:
    """(command, option, its type) for every option of every command that takes a
    number."""
    _, commands = _parser()
    for command, parser in commands.choices.items():
        for action in parser._actions:
            if isinstance(action.type, Bounded):
                yield command, action.option_strings[-1], action.type


def test_no_option_takes_an_unbounded_number() -> None:
    _, commands = _parser()
    plain = [(command, action.option_strings) for command, parser in commands.choices.items()
             for action in parser._actions if action.type in (int, float)]
    assert plain == []
    found = {(command, option) for command, option, _ in numeric_options()}
    assert {("inspect", "--limit"), ("worker", "--concurrency"), ("worker", "--grace"),
            ("worker", "--prefetch"), ("dashboard", "--port"), ("shutdown", "--wait"),
            ("bench", "--tasks"), ("bench", "--memory-tasks"),
            ("worker", "--max-tasks-per-child")} <= found


@pytest.mark.parametrize("command, option, kind", list(numeric_options()))
def test_a_number_out_of_range_is_a_usage_error_naming_the_option_and_range(
        command: str, option: str, kind: Bounded, capsys: pytest.CaptureFixture[str]) -> None:
    for value in HOSTILE:
        in_range = False
        try:
            if not value.isascii() or value != value.strip() or "_" in value:
                raise ValueError(value)
            number = float(value)
            in_range = kind.low <= number <= kind.high and (kind.seconds
                                                            or number == int(number))
        except (ValueError, OverflowError):
            pass
        if in_range:
            continue
        with pytest.raises(SystemExit) as exited:
            main([command, "-A", "nosuch.app", f"{option}={value}"] if command != "bench"
                 else [command, f"{option}={value}"])
        assert exited.value.code == 2, (option, value)
        err = capsys.readouterr().err
        assert "argument " in err and option in err and kind.range() in err, err
    for edge in (kind.low, kind.high):
        assert kind(str(edge)) == edge


def test_the_limit_that_was_an_outage_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["inspect", "-A", "tests.apps.basic", "recent", "--limit", "99999999999999999999"])
    assert exited.value.code == 2
    assert "--limit" in capsys.readouterr().err


@pytest.mark.parametrize("listed", [running, scheduled, recent])
@pytest.mark.parametrize("limit", [0, -1, LIMIT_MOST + 1, 10 ** 20])
def test_the_listings_refuse_a_limit_out_of_range_before_reading_redis(
        app: Minitask, fake_redis: Any, listed: Any, limit: int) -> None:
    with pytest.raises(ConfigurationError, match="from 1 to 100,000"):
        listed(app, limit=limit)


@pytest.mark.parametrize("listed", [running, scheduled, recent])
def test_a_listing_of_a_mistyped_queue_gets_the_commands_did_you_mean(
        app: Minitask, listed: Any) -> None:
    """The listings (inspect, the dashboard's tabs) suggest as the commands do: case
    aside."""
    @app.task(queue="emails")
    def send() -> None: ...

    with pytest.raises(ConfigurationError, match="did you mean 'emails'"):
        listed(app, ["EMAILS"])


@pytest.mark.parametrize("argv, says", [
    (["inspect", "-A", "nosuch.app", "recnt"],
     "unknown listing 'recnt'; did you mean 'recent'?"),
    (["inspect", "-A", "nosuch.app", "runing", "--json"], "did you mean 'running'?"),
    (["inspect", "-A", "nosuch.app", "Scheduled"], "did you mean 'scheduled'?"),
    (["inspect", "-A", "nosuch.app", "workflw", "x"],
     "unknown listing 'workflw'; did you mean 'workflow'?"),
    (["inspect", "-A", "nosuch.app", "a", "b"], "or workflow and its id"),
    (["inspect", "-A", "nosuch.app", "workflow", ""], "one workflow id (not empty)"),
    (["dead", "-A", "nosuch.app", "lst"], "unknown action 'lst'; did you mean 'list'?"),
    (["dead", "-A", "nosuch.app", "requeu", "abc"], "did you mean 'requeue'?"),
])
def test_a_mistyped_word_gets_a_did_you_mean(argv: List[str], says: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2  # before the app is loaded: nosuch.app is never imported
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["inspcet", "-A", "x"], "unknown command 'inspcet'; did you mean 'inspect'?"),
    (["embedded", "stat"], "unknown choice 'stat'; did you mean 'status'?"),
    (["worker", "-A", "x", "--pool", "procss"], "did you mean 'process'?"),
    (["inspect", "-A", "x", "recent", "--state", "faild"], "did you mean 'failed'?"),
    (["status", "-A", "x", "--log-format", "jsn"], "did you mean 'json'?"),
])
def test_a_mistyped_choice_gets_a_did_you_mean(argv: List[str], says: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


def test_a_word_far_from_every_listing_is_still_a_task_id(
        capsys: pytest.CaptureFixture[str]) -> None:
    """An id is looked up (and the app loaded), not refused as a mistyped listing."""
    assert main(["inspect", "-A", "nosuch.app", "report-1"]) == 2
    err = capsys.readouterr().err
    assert "listing" not in err and "nosuch" in err


def test_every_parser_of_the_command_suggests() -> None:
    parser, commands = _parser()
    assert all(type(sub) is type(parser) for sub in commands.choices.values())
    assert isinstance(parser, argparse.ArgumentParser)


def test_a_mistyped_queue_gets_a_did_you_mean(app: Minitask, fake_redis: Any,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    @app.task(queue="emails")
    def send() -> None:
        """A task of queue emails."""

    for command in (dead, inspect_command, purge):
        monkeypatch.setattr(command, "load", lambda _: app)
    monkeypatch.setattr(app, "close", lambda: None)
    for argv in (["purge", "-A", "x", "emials", "--yes"],
                 ["dead", "-A", "x", "list", "--queue", "emials"],
                 ["inspect", "-A", "x", "recent", "--queue", "emials"]):
        assert main(argv) in (1, 2), argv
        assert "has no queue 'emials'; did you mean 'emails'?" in capsys.readouterr().err, argv


@pytest.mark.parametrize("kind", [Bounded(1, 100), Bounded(0, 100, seconds=True)])
@pytest.mark.parametrize("text", ["\u0661\u0660", "\uff11\uff10", "1_0", " 10", "\u00b9"])
def test_a_number_in_other_digits_than_ascii_is_refused(kind: Bounded, text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="give a"):
        kind(text)
    assert kind("10") == 10 and kind("+10") == 10
