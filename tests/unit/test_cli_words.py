"""Commands that take task ids read every word that is not one of their options as an id,
so that ids starting with '-' or '--' (one generated id in 64) are never options."""
from __future__ import annotations

import argparse
import re
from typing import List

import pytest

from minitask.cli import main
from minitask.cli.main import _parser, _with_words
from tests.support.paths import ROOT


def parse(argv: List[str]) -> argparse.Namespace:
    parser, commands = _parser()
    args = parser.parse_args(_with_words(commands, argv))
    args.words = getattr(args, "pending_words", getattr(args, "words", None))
    return args


@pytest.mark.parametrize("task_id", ["-Xk3abcdefghijklmnopq", "--Xk3abcdefghijklmnop", "-A",
                                     "-Aabc", "--json", "--app", "-", "--app=x", "abc"])
def test_an_id_is_read_as_an_id_whatever_it_starts_with(task_id: str) -> None:
    args = parse(["inspect", "-A", "shop.tasks", "--", task_id, ])
    assert args.words == [task_id] and args.app == "shop.tasks"
    if task_id not in ("-A", "--json", "--app") and not task_id.startswith("--app="):
        # without "--" too: anything that is not exactly an option is an id
        args = parse(["inspect", "-A", "shop.tasks", task_id, "--json"])
        assert args.words == [task_id] and args.json is True


def test_options_are_read_in_any_order_and_in_their_long_forms() -> None:
    args = parse(["dead", "show", "-Xk3", "--app=shop.tasks", "--queue", "-q", "--json"])
    assert args.words == ["show", "-Xk3"]
    assert (args.app, args.queue, args.json) == ("shop.tasks", "-q", True)


def test_several_ids_keep_their_order() -> None:
    args = parse(["cancel", "-A", "shop", "b", "-a", "--c", "d"])
    assert args.words == ["b", "-a", "--c", "d"]


def test_commands_without_words_parse_as_before() -> None:
    args = parse(["status", "-A", "shop", "--json"])
    assert args.json is True and args.words is None


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert re.fullmatch(r"minitask \d+\.\d+\.\d+\n", capsys.readouterr().out)


@pytest.mark.parametrize("grace", ["-1", "nan", "inf", "soon"])
def test_worker_refuses_a_grace_that_is_not_0_or_more_seconds(
        grace: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["worker", "-A", "shop", "--grace", grace])
    assert exited.value.code == 2
    assert "--grace" in capsys.readouterr().err


def test_a_command_missing_its_words_says_what_it_takes(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "-A", "tests.apps.basic"]) == 2
    assert "name one task id" in capsys.readouterr().err


def test_the_docs_first_app_and_the_quickstart_example_are_different_apps() -> None:
    """Both use the shared per-user embedded broker: with one name, each one's worker
    would take the other's tasks and dead-letter them as unknown."""
    page = (ROOT / "docs" / "getting-started.rst").read_text()
    first_app = page.split("A first app in five minutes\n---")[1].split("\n---")[0]
    (readme_name,) = set(re.findall(r'Minitask\("([^"]+)"\)', first_app))
    example = (ROOT / "examples" / "quickstart" / "tasks.py").read_text()
    (example_name,) = re.findall(r'Minitask\("([^"]+)"\)', example)
    assert readme_name != example_name
