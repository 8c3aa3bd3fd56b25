"""An app for the tests of a worker whose Redis ACL user may not write some outcome
of its queue (an ACL changed, a key pattern too narrow): ``add`` and ``boom`` (fails,
never retried) on the default queue. The broker comes from MINITASK_BROKER_URL;
TEST_VISIBILITY sets visibility_timeout (how long a refused write is retried)."""
from __future__ import annotations

import os

from minitask import Minitask

app = Minitask("aclout", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


@app.task(name="add")
def add(x: int, y: int = 0) -> int:
    return x + y


@app.task(name="boom", retries=0)
def boom() -> None:
    raise ValueError("boom")
