"""The ``minitask`` command's real parser, for sphinx-argparse (docs/reference/cli.rst)."""
from __future__ import annotations

import argparse

from minitask.cli.main import _parser


def parser() -> argparse.ArgumentParser:
    """The parser ``minitask`` runs with: every command and option, as the CLI sees them."""
    return _parser()[0]
