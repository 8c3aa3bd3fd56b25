"""The ACL rules the docs give for minitask's Redis user."""
from __future__ import annotations

from typing import List

from tests.support.paths import ROOT


def documented_acl() -> List[str]:
    """The ``ACL SETUSER minitask ...`` rules the docs document, password left out."""
    readme = (ROOT / "docs" / "guide" / "scaling.rst").read_text()
    start = readme.index("   ACL SETUSER minitask ")
    block = readme[start:readme.index("\n\n", start)]
    rules = block.split()[3:]
    return [rule for rule in rules if not rule.startswith(">")]


def documented_commands() -> List[str]:
    return [rule[1:] for rule in documented_acl() if rule.startswith("+")]
