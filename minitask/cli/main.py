"""The ``minitask`` command: parses, sets up logging (the only place that does), runs
one command module, and turns errors into exit codes."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Callable, Optional, Sequence, Tuple, Type

from ..errors import AppNotFound, BrokerError, ConfigurationError, MinitaskError
from . import bench, schedules, status, worker

#: The command modules, in the order ``--help`` lists them; each has ``register``.
COMMANDS = (worker, status, schedules, bench)

#: Error type -> exit code; the first match wins.
EXIT_CODES: Tuple[Tuple[Type[BaseException], int], ...] = (
    (AppNotFound, 2),
    (ConfigurationError, 2),
    (BrokerError, 3),
    (MinitaskError, 1),
)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.command
    return run(lambda: command(args), getattr(args, "loglevel", "INFO"))


def run(command: Callable[[], int], loglevel: str) -> int:
    """Set up logging, run a command, and turn its errors into exit codes."""
    logging.basicConfig(level=loglevel.upper(),
                        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # -A names modules of the project being run
    try:
        return command()
    except KeyboardInterrupt:
        return 130
    except MinitaskError as exc:
        for error_type, code in EXIT_CODES:
            if isinstance(exc, error_type):
                print(f"minitask: error: {exc}", file=sys.stderr)
                return code
        raise  # pragma: no cover - MinitaskError is always matched above


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minitask", description="Run and inspect minitask "
                                     "workers.")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return parser
