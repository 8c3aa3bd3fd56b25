"""A distribution "installed" in a site directory of a test's own: its dist-info, which
``importlib.metadata`` reads for its entry points, without pip."""
from __future__ import annotations

import textwrap
from pathlib import Path


def installed(site: Path, name: str, version: str, entry_points: str) -> Path:
    """Write ``name`` ``version``'s dist-info under ``site`` with ``entry_points`` (the
    text of its entry_points.txt, dedented); the dist-info directory."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points).lstrip("\n"))
    return info
