"""An app for the tests of a worker whose Redis ACL user may not write the keys of a
queue its tasks send to (issue 29, M1): ``add`` on the default queue, ``other`` on
queue "other". The broker comes from MINITASK_BROKER_URL; TEST_VISIBILITY sets
visibility_timeout (the bound a refused workflow step is retried for)."""
from __future__ import annotations

import os
from typing import Any

from minitask import Minitask

app = Minitask("aclsteps", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


@app.task(name="add")
def add(x: int, y: int = 0) -> int:
    return x + y


@app.task(name="other", queue="other")
def other(x: Any) -> Any:
    return x
