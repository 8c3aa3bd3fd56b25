"""The Makefile: every name .PHONY lists is a target that exists."""
from __future__ import annotations

import re
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def test_every_phony_name_is_a_target_of_the_makefile() -> None:
    text = MAKEFILE.read_text()
    phony = set()
    for line in re.findall(r"^\.PHONY:(.*)$", text, flags=re.MULTILINE):
        phony.update(line.split())
    targets = set(re.findall(r"^([A-Za-z0-9_.$()-]+):(?!=)", text, flags=re.MULTILINE))
    assert {"demo", "test", "fast", "clean"} <= phony
    assert not phony - targets, f".PHONY names missing targets: {sorted(phony - targets)}"
