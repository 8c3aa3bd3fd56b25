"""An app whose tasks wait for other tasks' results (``awaits``, queue ``waits``,
gets ``answer``, queue ``answers``): a worker serving ``waits`` at high
concurrency must go on while its tasks' waits are many. The broker comes from
MINITASK_BROKER_URL."""
from __future__ import annotations

from typing import Any

from minitask import Minitask

#: Seconds a task waits for the result it was given.
WAITS_AT_MOST = 120.0


def build(broker: Any = None) -> Minitask:
    """The app, on ``broker`` (None: MINITASK_BROKER_URL): the tests build it too."""
    app = Minitask("waitingtasks", broker=broker)

    @app.task(queue="answers", name="answer")
    def answer(n: int) -> int:
        """Run by the test itself, once the waits wait."""
        return n

    @app.task(queue="waits", name="awaits")
    def awaits(task_id: str) -> int:
        """Wait, inside the worker, for another task's result."""
        return int(app.handle(task_id).get(timeout=WAITS_AT_MOST))

    return app


app = build()
