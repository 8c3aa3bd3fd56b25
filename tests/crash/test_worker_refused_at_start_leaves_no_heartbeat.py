"""A worker that exits at start because Redis refused one of its start-up steps (here:
its ACL user lacks TIME, so it cannot subscribe to the broadcasts of the queue it
serves) leaves no heartbeat behind: before, it was listed in the workers registry
before it subscribed, and with its clock an hour ahead that entry showed it live, an
hour ahead, in ``status`` for an hour. The worker is a real process on a real
redis-server, its clock shifted by tests.apps.skewed_broadcast."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minitask.broker.keys import AppKeys, QueueKeys
from tests.apps.broadcast import QUEUE
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer

pytestmark = pytest.mark.crash


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_refused_at_start_leaves_no_heartbeat(
        server: RedisServer, admin: Any, processes: Processes, tmp_path: Path,
        pool: str) -> None:
    url = user_without(admin, server, "time")
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.skewed_broadcast", "--pool", pool, "-c", "1",
                              "--name", "ahead", "-Q", QUEUE, log=log,
                              env={"MINITASK_BROKER_URL": url, "TEST_SUBSCRIBER": "ahead",
                                   "TEST_CLOCK_AHEAD_S": "3600"})
    code = exit_code(worker)
    said = log.read_text(errors="replace")
    assert code == 3, said  # a BrokerError at start
    assert "could not subscribe 'ahead'" in said, said
    keys = AppKeys("bcast")
    assert admin.zcard(keys.workers) == 0, said
    assert not admin.keys(keys.worker("*")), said
    # and no subscriber a join() would wait for
    assert admin.zscore(QueueKeys("bcast", QUEUE).broadcast("since"),
                        "ahead") is None
