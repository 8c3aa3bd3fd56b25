"""A process pool's children writing outcomes replicas must confirm (durability=
"replicated", a short timeout), for the unconfirmed count they share with their
supervisor (review29e F2, F3). ``pid`` says which child ran it; ``killed`` kills its
child with SIGKILL while it holds the count's lock, where there is one (there was:
the supervisor then blocked on it for ever). The broker comes from
MINITASK_BROKER_URL."""
from __future__ import annotations

import os
import signal

from minitask import Minitask

app = Minitask("unconfirmed_children", durability="replicated", min_replicas=1,
               durability_timeout=0.3, visibility_timeout=3.0)  # a heartbeat a second


@app.task(name="pid")
def pid() -> int:
    return os.getpid()


@app.task(name="killed", retries=0)
def killed() -> None:
    from minitask.worker.unconfirmed import WRITES
    lock = getattr(WRITES, "_lock", None)
    if lock is not None:
        lock.acquire()  # as seen(), confirmed() or tick() hold it, in any child
    os.kill(os.getpid(), signal.SIGKILL)
