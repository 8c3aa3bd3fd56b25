"""README.rst names every script ``make demo`` runs, and the workers guide gives each
pool's ``-c`` default (trial34: the README left out the logfanout demo, the guide the
asyncio pool's 100)."""
from __future__ import annotations

import re
from pathlib import Path

from minitask.cli.worker import ASYNCIO_CONCURRENCY

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_names_every_script_make_demo_runs() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "no demo target"
    scripts = re.findall(r"examples/\S+\.py", recipe.group(1))
    assert len(scripts) >= 2, scripts
    readme = " ".join((ROOT / "README.rst").read_text().split())
    for script in scripts:
        assert f"``{script}``" in readme, script


def test_the_workers_guide_gives_every_pools_concurrency_default() -> None:
    guide = (ROOT / "docs" / "guide" / "workers.rst").read_text()
    entry = guide.split("``-c``, ``--concurrency``", 1)[1].split("\n``", 1)[0]
    said = " ".join(entry.split())
    assert "the number of CPUs with the process pool" in said, said
    assert "1 with the thread pool" in said, said
    assert f"{ASYNCIO_CONCURRENCY} with the asyncio pool" in said, said
