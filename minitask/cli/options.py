"""What every command about an app shares: ``-A``, logging options, loading the app,
and the words (task ids, queue and worker names) of commands that take them."""
from __future__ import annotations

import argparse
import json
import logging
from typing import Any, List, Sequence, Tuple

from ..app import Minitask
from ..discovery import load_app, load_task_plugins

logger = logging.getLogger("minitask")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "debug", "info", "warning", "error")


def add_log_options(parser: argparse.ArgumentParser, level: str = "INFO") -> None:
    parser.add_argument("--loglevel", default=level, choices=LOG_LEVELS)
    parser.add_argument("--log-format", default="text", choices=("text", "json"),
                        help="text (default), or one JSON object per line")


def add_app_options(parser: argparse.ArgumentParser, level: str = "INFO") -> None:
    parser.add_argument("-A", "--app", required=True,
                        help="an entry point of minitask.apps, a module, or module:attribute")
    add_log_options(parser, level)


def takes_words(parser: argparse.ArgumentParser) -> None:
    """Mark a command whose positional words may start with '-'.

    Task ids are random url-safe base64 and one in 64 starts with '-' (a
    user's ``task_id`` may too): argparse would read ``-Xk3...`` as an option.
    So ``main`` takes every word that is not exactly one of the command's
    options (given as its own word, or ``--long=value``) as a word, and hands
    them over as ``args.words``; after ``--`` everything is a word.
    """
    parser.set_defaults(words=[])


def split_words(parser: argparse.ArgumentParser,
                argv: Sequence[str]) -> Tuple[List[str], List[str]]:
    """``argv`` (after the command) as (options with their values, words)."""
    takes_value = {}
    for action in parser._actions:  # argparse has no public list of a parser's options
        for option in action.option_strings:
            takes_value[option] = action.nargs != 0
    options: List[str] = []
    words: List[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        index += 1
        if token == "--":
            words += argv[index:]
            break
        name = token.split("=", 1)[0] if token.startswith("--") else token
        if name not in takes_value:
            words.append(token)
            continue
        if takes_value[name] and name == token and index < len(argv):
            # glued to its option, so that argparse takes a value such as "-q" as a value
            value = argv[index]
            index += 1
            token = f"{name}={value}" if name.startswith("--") else f"{name}{value}"
        options.append(token)
    return options, words


def load(spec: str) -> Minitask:
    """The app ``-A`` names, with its task plugins imported."""
    app = load_app(spec)
    for module in load_task_plugins(app):
        logger.debug("imported task plugin %s", module)
    return app


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False))
