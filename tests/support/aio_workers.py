"""What the crash tests of tests.apps.aio's workers under planted data share: a worker
process (``aio_worker``) and the bytes Redis has sent (``sent_bytes``: what a planted
huge value costs, asserted on what Redis did rather than on times)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import redis

from tests.support.processes import Processes
from tests.support.servers import RedisServer


def aio_worker(processes: Processes, server: RedisServer, pool: str, log: Path,
               slots: int = 2) -> "subprocess.Popen[bytes]":
    """A worker process of tests.apps.aio on ``server`` (``slots`` of ``pool``), writing
    ``log``."""
    return processes.start("-m", "minitask", "worker", "-A", "tests.apps.aio", "--pool", pool,
                           "-c", str(slots), log=log, env={"MINITASK_BROKER_URL": server.url})


def sent_bytes(client: "redis.Redis[bytes]") -> int:
    """Bytes Redis has sent to its clients so far."""
    return int(client.info("stats")["total_net_output_bytes"])
