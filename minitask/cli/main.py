"""The ``minitask`` command: parses, sets up logging (the only place that does), runs
one command module, and turns errors into exit codes."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Callable, List, Optional, Sequence, Tuple, Type

from .. import __version__
from ..errors import AppNotFound, BrokerError, ConfigurationError, MinitaskError
from . import (bench, cancel, dashboard, dead, embedded, inspect, purge, schedules, shutdown,
               status, tasks, unsubscribe, worker)
from .logs import handler
from .options import Parser, mistyped_option, split_words

#: The command modules, in the order ``--help`` lists them; each has ``register``.
COMMANDS = (worker, status, tasks, inspect, cancel, dead, purge, schedules, shutdown, embedded,
            bench, unsubscribe, dashboard)

#: Error type -> exit code; the first match wins.
EXIT_CODES: Tuple[Tuple[Type[BaseException], int], ...] = (
    (AppNotFound, 2),
    (ConfigurationError, 2),
    (BrokerError, 3),
    (MinitaskError, 1),
)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the process exit code."""
    parser, commands = _parser()
    args = parser.parse_args(_with_words(commands, list(sys.argv[1:] if argv is None
                                                        else argv)))
    words = getattr(args, "pending_words", None)
    if words is not None:
        args.words = words
    command: Callable[[argparse.Namespace], int] = args.command
    return run(lambda: command(args), getattr(args, "loglevel", "INFO"),
               getattr(args, "log_format", "text"))


def run(command: Callable[[], int], loglevel: str, log_format: str = "text") -> int:
    """Set up logging, run a command, and turn its errors into exit codes."""
    logging.basicConfig(level=loglevel.upper(), handlers=[handler(log_format)])
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # -A names modules of the project being run
    try:
        return command()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): no traceback, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit must not fail too
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by it
    except MinitaskError as exc:
        for error_type, code in EXIT_CODES:
            if isinstance(exc, error_type):
                print(f"minitask: error: {exc}", file=sys.stderr)
                return code
        raise  # pragma: no cover - MinitaskError is always matched above


def _with_words(commands: argparse._SubParsersAction,  # type: ignore[type-arg]
                argv: List[str]) -> List[str]:
    """Take the words (ids, names) of a command that has them out of ``argv``, so that
    argparse never reads an id starting with '-' as an option (see ``takes_words``);
    they come back as ``args.words``."""
    if not argv or argv[0] not in commands.choices:
        return argv
    parser = commands.choices[argv[0]]
    if parser.get_default("words") is None:
        return argv
    options, words = split_words(parser, argv[1:])
    mistyped = mistyped_option(argv[0], parser, argv[1:], [
        option for other in commands.choices.values() if other is not parser
        for action in other._actions for option in action.option_strings])
    if mistyped is not None:
        parser.error(mistyped)  # a bad command line: usage, the message, exit 2
    parser.set_defaults(pending_words=words)
    return [argv[0], *options]


def _parser() -> Tuple[argparse.ArgumentParser,
                       argparse._SubParsersAction]:  # type: ignore[type-arg]
    parser = Parser(prog="minitask", description="Run and inspect minitask workers.")
    parser.add_argument("--version", action="version", version=f"minitask {__version__}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return parser, commands
