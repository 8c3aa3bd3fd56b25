"""tests.apps.basic whose process pool children die as they start (``os._exit(1)`` in
their ``worker_process_init`` hook) while the file named by TEST_DIE_AT_START exists;
each such child first appends its pid to that file, for the test to count them."""
from __future__ import annotations

import os

from tests.apps.basic import app

__all__ = ["app"]


def _die_while_flagged(worker: object) -> None:
    flag = os.environ["TEST_DIE_AT_START"]
    if not os.path.exists(flag):
        return  # the flag is gone: this child starts
    with open(flag, "a") as deaths:
        deaths.write(f"{os.getpid()}\n")
    os._exit(1)


app.on("worker_process_init", _die_while_flagged)
