"""A real worker started for a test and found in its app's worker registry."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Tuple

import redis

from minitask.broker.keys import AppKeys
from tests.support.processes import Processes
from tests.support.waiting import wait_until


def listed_worker(processes: Processes, admin: "redis.Redis[bytes]", app: str, app_name: str,
                  name: str, url: str, log: Path, deadline: float = 60.0
                  ) -> Tuple["subprocess.Popen[bytes]", str]:
    """A worker of ``app`` (a module path) named ``name``, serving queue "other" on
    ``url``, and its id once its first heartbeat lists it in ``app_name``'s registry."""
    worker = processes.worker(app, "-Q", "other", "--name", name,
                              env={"MINITASK_BROKER_URL": url}, log=log)
    worker_id = wait_until(lambda: next(
        (member.decode() for member in admin.zrange(AppKeys(app_name).workers, 0, -1)), None),
        timeout=deadline, message="the worker's heartbeat")
    return worker, worker_id
