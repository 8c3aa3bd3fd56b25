"""An app for a subprocess worker in tests of sends by an ACL user (the broker from
MINITASK_BROKER_URL): the producer in the test defines the same tasks."""
from __future__ import annotations

from minitask import Minitask

app = Minitask("aclsends")


@app.task(name="add")
def add(x: int, y: int = 0) -> int:
    return x + y
