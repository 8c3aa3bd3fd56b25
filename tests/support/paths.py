"""Where the project lives on disk."""
from __future__ import annotations

from pathlib import Path

#: The repository's root: the working directory of subprocesses, the base of its files.
ROOT = Path(__file__).resolve().parent.parent.parent
