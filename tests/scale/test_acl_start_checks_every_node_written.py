"""On a real Redis Cluster (three primaries), whose nodes each keep their own ACL, a
worker's start check and an ops command's check ask every primary node they write to
(probe 29q, items 1 and 2).

Before, the worker asked only the node of its first queue: a user lacking RPUSH on the
node of its second queue had the worker start, its first task of that queue half acked
(the lease removed, the message kept) and never run again. And ``minitask cancel``
asked only the default queue's node: cancel.lua of a task of another queue was refused
part way there, the message deleted with no outcome written.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, List

import pytest

from minitask import ConfigurationError, Minitask
from minitask.broker.keys import QueueKeys
from minitask.cli import cancel as cancel_command
from tests.support.cli import operate_with, run
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer
from tests.support.topologies import Cluster, slot_of

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]

APP = "aclsends"  # tests/apps/acl_sends.py: the worker's
USER = "clnodes"


@pytest.fixture
def url(cluster: Cluster) -> Iterator[str]:
    """A user who may run every command, on every node (a test takes one away)."""
    for node in cluster.nodes:
        with node.client() as client:
            client.execute_command("ACL", "SETUSER", USER, "reset", "on", ">pw", "~*",
                                   "&*", "+@all")
    yield f"redis+cluster://{USER}:pw@" + ",".join(f"127.0.0.1:{node.port}"
                                                   for node in cluster.nodes)
    for node in cluster.nodes:
        with node.client() as client:
            client.execute_command("ACL", "DELUSER", USER)


def _take_away(node: RedisServer, command: str) -> None:
    with node.client() as client:
        client.execute_command("ACL", "SETUSER", USER, f"-{command}")


def _queue_not_on(cluster: Cluster, *nodes: RedisServer) -> str:
    """A queue of ``APP`` on none of ``nodes``."""
    ports = {node.port for node in nodes}
    return next(name for name in (f"n{index}" for index in range(1000))
                if cluster.owner_of_slot(slot_of(APP, name)).port not in ports)


def _app_node(cluster: Cluster) -> RedisServer:
    """The node of the app-wide keys (tag ``{aclsends}``)."""
    with cluster.nodes[0].client() as client:
        slot = int(client.execute_command("CLUSTER", "KEYSLOT", "{%s}" % APP))
    return cluster.owner_of_slot(slot)


def _worker(processes: Processes, url: str, queues: List[str], log: Path) -> int:
    worker = processes.worker("tests.apps.acl_sends", "--pool", "thread", "-c", "1",
                              "--burst", "-Q", ",".join(queues),
                              env={"MINITASK_BROKER_URL": url}, log=log)
    return exit_code(worker)


def test_a_worker_asks_the_node_of_each_of_its_queues(
        cluster: Cluster, url: str, processes: Processes, tmp_path: Path) -> None:
    first = _queue_not_on(cluster)
    first_node = cluster.owner_of_slot(slot_of(APP, first))
    second = _queue_not_on(cluster, first_node)
    node = cluster.owner_of_slot(slot_of(APP, second))
    _take_away(node, "rpush")  # on the second queue's node only
    log = tmp_path / "worker.log"
    assert _worker(processes, url, [first, second], log) == 2, log.read_text()
    said = log.read_text()
    assert "cannot start" in said and "+rpush" in said, said
    assert f"node 127.0.0.1:{node.port}" in said and f"{{{APP}:{second}}}" in said, said
    with node.client() as client:
        client.execute_command("ACL", "SETUSER", USER, "+rpush")  # fixed: it starts
    assert _worker(processes, url, [first, second], tmp_path / "again.log") == 0, \
        (tmp_path / "again.log").read_text()


def test_a_worker_asks_the_node_of_the_app_wide_keys(
        cluster: Cluster, url: str, processes: Processes, tmp_path: Path) -> None:
    app_node = _app_node(cluster)
    queue = _queue_not_on(cluster, app_node)
    _take_away(app_node, "hincrbyfloat")  # its heartbeat's metrics
    log = tmp_path / "worker.log"
    assert _worker(processes, url, [queue], log) == 2, log.read_text()
    said = log.read_text()
    assert "cannot start" in said and "+hincrbyfloat" in said, said
    assert f"node 127.0.0.1:{app_node.port}" in said, said


def test_cancel_asks_the_node_of_the_tasks_queue_before_writing(
        cluster: Cluster, url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    default_node = cluster.owner_of_slot(slot_of(APP, "default"))
    other = _queue_not_on(cluster, default_node)
    node = cluster.owner_of_slot(slot_of(APP, other))
    app = Minitask(APP, broker=url)
    add = app.task(name="add")(lambda x: x)
    try:
        handle = add.apply_async((1,), queue=other)
        _take_away(node, "rpush")  # cancel.lua's, after its first write
        operate_with(app, monkeypatch, cancel_command)
        code, said = run(capsys, "cancel", "-A", APP, handle.id)
        assert code == 2 and "+rpush" in said, said
        assert f"node 127.0.0.1:{node.port}" in said, said
        with node.client() as client:  # nothing written: the task still queued
            assert client.hexists(QueueKeys(APP, other).messages, handle.id)
        assert handle.status() == "queued"
        with node.client() as client:
            client.execute_command("ACL", "SETUSER", USER, "+rpush")
        code, said = run(capsys, "cancel", "-A", APP, handle.id)
        assert code == 0 and handle.status() == "cancelled", said
    finally:
        app.close()


def test_a_resp3_cluster_url_is_refused_before_sending(cluster: Cluster) -> None:
    url = "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in cluster.nodes)
    app = Minitask("resp3cl", broker=f"{url}/0?protocol=3")
    add = app.task(name="add")(lambda x: x)
    try:
        with pytest.raises(ConfigurationError, match=r"protocol=3 \(RESP3\)"):
            add.delay(1)
    finally:
        app.close()
