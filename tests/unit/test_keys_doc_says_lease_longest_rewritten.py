"""docs/reference/keys.rst says when a worker writes ``lease_longest``: before its
first fetch and again every ``SAY_AGAIN`` heartbeats (``Leases.renew``), not only
as it starts."""
from __future__ import annotations

import pathlib
import re

from minitask.worker.leases import SAY_AGAIN

KEYS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference" / "keys.rst"


def test_the_lease_longest_row_says_it_is_written_again_every_few_heartbeats() -> None:
    text = KEYS.read_text(encoding="utf-8")
    row = text.split("``minitask:{app:queue}:lease_longest``", 1)[1].split("   * - ", 1)[0]
    said = re.sub(r"\s+", " ", row)
    assert "before its first fetch" in said
    assert f"again every {SAY_AGAIN} heartbeats" in said
