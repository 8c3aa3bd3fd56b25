"""Fair queues, readers first: a queue of solo groups sent by this release is drained
by a worker of a minitask before the ``:`` claim form (tree 386b05e, whose fetch reads
``/`` claims only): a rolling deploy (new senders, old workers) or a rollback strands
no task. This release writes ``/`` claims only (lib.lua's PLAIN_SOLO_CLAIM); with
``:`` claims the old worker's fetch left each such task unserved, for ever.

The old tree is taken from this repository's history (``git archive``) into a temp
folder and its worker run from there (skipped where there is no git history).
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Iterator, List

import pytest
import redis

from minitask import Minitask
from minitask.admin import pause_group, resume_group
from minitask.broker.keys import QueueKeys
from tests.apps import fair
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

#: the last merge before the ':' claim form (fair35e)
OLD_TREE = "386b05e"
ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 50.0  # each wait (the test: 120 s at most, pytest-timeout)
KEYS = QueueKeys("fair", "default")


def _old_tree(into: Path) -> Path:
    try:
        archive = subprocess.run(["git", "archive", OLD_TREE, "minitask", "tests/apps",
                                  "tests/__init__.py"],
                                 cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip(f"no git history holding {OLD_TREE} here")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into)
    return into


@pytest.fixture
def old_processes(tmp_path: Path) -> Iterator[Processes]:
    tree = _old_tree(tmp_path / "old")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.pop("MINITASK_BROKER_URL", None)
    where = subprocess.run([sys.executable, "-c", "import minitask; print(minitask.__file__)"],
                           cwd=tree, env=env, capture_output=True, check=True, timeout=60)
    assert where.stdout.decode().startswith(str(tree)), where.stdout  # the old tree's
    owner = Processes(env, tree)
    try:
        yield owner
    finally:
        owner.kill_all()


def _group_keys(client: "redis.Redis[bytes]") -> List[str]:
    return sorted(key.decode() for key in client.keys("*{fair:default}*")
                  if b":g:" in key or b"groups" in key or key.endswith(b":cancelled"))


@pytest.mark.integration
@pytest.mark.crash
def test_an_older_worker_drains_the_solo_groups_this_release_sends(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", old_processes: Processes,
        tmp_path: Path) -> None:
    app = Minitask("fair", broker=redis_server.client())
    job = app.task(name="tests.apps.fair.tenant_job", group_by="tenant")(fair.tenant_job.func)
    try:
        job.delay_many([(f"S{n}", 0) for n in range(20)])  # the send's inline join
        pause_group(app, "default", "Z")  # a group paused: flow.lua's join() sends
        job.delay_many([(f"F{n}", 0) for n in range(5)])
        resume_group(app, "default", "Z")
        job.delay("J", 0)
        job.delay("J", 1)  # a second task joins a solo group
        old_processes.worker("tests.apps.fair", "--pool", "thread", "--loglevel", "WARNING",
                             "-c", "1", env={"MINITASK_BROKER_URL": redis_server.url},
                             log=tmp_path / "worker.log")

        def starts() -> List[str]:
            return [raw.decode() for raw in admin.lrange("fair:starts", 0, -1)]

        wanted = sorted([f"S{n}:0" for n in range(20)] + [f"F{n}:0" for n in range(5)]
                        + ["J:0", "J:1"])
        wait_until(lambda: sorted(starts()) == wanted, timeout=DEADLINE,
                   message="the older worker to start every task this release sent")
        wait_until(lambda: _group_keys(admin) == [] and not admin.zcard(KEYS.leases),
                   timeout=DEADLINE, message="the groups' keys to go")
    finally:
        old_processes.kill_all()
        app.close()
        if (tmp_path / "worker.log").exists():
            print((tmp_path / "worker.log").read_text(errors="replace")[-4000:])
