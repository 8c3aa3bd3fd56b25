"""A producer that stalls between reserving its workflow's explicit step ids and sending
the workflow, for the test that kills it there (SIGKILL): it reserves a chord's ids
(``A`` and ``C`` in queue default, ``B`` in queue other), says ``reserved <workflow id>``
on stdout and sleeps until it is killed. Broker: MINITASK_BROKER_URL; the workflow's
result_ttl (s): RESULT_TTL. The stall is this module's (a wrapper of the store's
``reserve``), not minitask's."""
from __future__ import annotations

import os
import sys
import time
from typing import Any

from minitask import chord
from minitask.stores.step_ids import StepIdStore
from tests.support.reused_ids import reused_producer

_reserve = StepIdStore.reserve


def _reserve_then_stall(self: StepIdStore, tasks: Any, wid: str, ttl_ms: int) -> Any:
    _reserve(self, tasks, wid, ttl_ms)
    print(f"reserved {wid}", flush=True)
    time.sleep(600)  # killed here
    sys.exit("not killed")


def main() -> None:
    StepIdStore.reserve = _reserve_then_stall  # type: ignore[method-assign]
    app = reused_producer(os.environ["MINITASK_BROKER_URL"],
                          result_ttl=float(os.environ["RESULT_TTL"]))
    add, total = app.tasks["add"], app.tasks["total"]
    chord([add.si(1, 2).set(task_id="A"), add.si(3, 4).set(task_id="B", queue="other")],
          total.s().set(task_id="C")).delay()


if __name__ == "__main__":
    main()
