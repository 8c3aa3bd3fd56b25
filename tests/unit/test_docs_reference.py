"""The docs' reference documents every public name, at its public path."""
from __future__ import annotations

import re
from pathlib import Path

import minitask

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference"
DIRECTIVE = re.compile(r"^\.\. (?:autoclass|autofunction|autoexception|py:data):: (\w+)\s*$",
                       re.MULTILINE)


def test_every_name_in_all_has_a_reference_entry_under_minitask() -> None:
    documented = []
    for page in ("api.rst", "errors.rst"):
        text = (REFERENCE / page).read_text()
        assert ".. currentmodule:: minitask\n" in text
        documented += DIRECTIVE.findall(text)
    assert sorted(set(documented)) == sorted(minitask.__all__)
    assert len(documented) == len(set(documented)), "a name documented twice"
