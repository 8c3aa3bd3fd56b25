"""What every command about an app shares: ``-A``, ``--loglevel``, loading the app."""
from __future__ import annotations

import argparse
import logging

from ..app import Minitask
from ..discovery import load_app, load_task_plugins

logger = logging.getLogger("minitask")


def add_app_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-A", "--app", required=True,
                        help="an entry point of minitask.apps, a module, or module:attribute")
    parser.add_argument("--loglevel", default="INFO",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR", "debug", "info",
                                 "warning", "error"))


def load(spec: str) -> Minitask:
    """The app ``-A`` names, with its task plugins imported."""
    app = load_app(spec)
    for module in load_task_plugins(app):
        logger.debug("imported task plugin %s", module)
    return app
