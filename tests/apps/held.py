"""An app for the tests of what status, inspect and the dashboard say of ready tasks
no worker takes yet: ``heavy`` (max_running=2, queue ``default``) whose limits park
the tasks past two, and ``job`` (queue ``fair``) grouped by tenant, whose groups an
operator pauses. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

from typing import Any

from minitask import Minitask


def build(broker: Any = None) -> Minitask:
    """The app, on ``broker`` (None: MINITASK_BROKER_URL): the tests build it too."""
    app = Minitask("held", broker=broker)

    @app.task(max_running=2, name="heavy")
    def heavy(n: int) -> int:
        """Held past two running at once."""
        return n

    @app.task(queue="fair", group_by="tenant", name="job")
    def job(tenant: str, n: int) -> int:
        """A task of a fair queue, grouped by tenant."""
        return n

    return app


app = build()
