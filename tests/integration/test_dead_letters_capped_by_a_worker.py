"""A real worker on a real redis-server keeps at most ``dead_letters_max`` dead letters
a queue: with 5, eight failing calls (each dead before the next is sent) leave the five
newest, the three oldest deleted with their messages and reasons, counted (``minitask
status``) and said once in the worker's log (at most a line a queue a minute); listing,
requeue and purge of those left work as before."""
from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.cli import main
from tests.support.processes import Processes
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

EXIT_TIMEOUT = 120


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    client = redis_server.client()
    client.flushall()  # our own server: every test starts empty
    client.close()
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    yield redis_server.url


def _burst(processes: Processes, url: str, log: Path) -> None:
    process = processes.worker("tests.apps.dead_capped", "--burst", "-c", "1",
                               env={"MINITASK_BROKER_URL": url}, log=log)
    try:
        assert process.wait(timeout=EXIT_TIMEOUT) == 0, log.read_text(errors="replace")
    finally:
        if process.poll() is None:
            print(log.read_text(errors="replace"))


def test_eight_dead_letters_under_a_cap_of_five_leave_the_five_newest(
        processes: Processes, url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = Minitask("dead_capped", broker=url, dead_letters_max=5)

    @app.task(retries=0, name="fails")
    def fails(n: int) -> None:
        raise AssertionError("runs in the worker only")

    try:
        # one at a time, each dead before the next is sent: dead letters are dated in
        # whole ms and ties go by (random) id, so "the five newest" must be one order
        log = tmp_path / "worker.log"
        worker = processes.worker("tests.apps.dead_capped", "-c", "1",
                                  env={"MINITASK_BROKER_URL": url}, log=log)
        ids: List[str] = []
        for n in range(8):
            handle = fails.delay(n)
            deadline = time.monotonic() + EXIT_TIMEOUT
            while handle.status() != "failed":
                assert worker.poll() is None, log.read_text(errors="replace")
                assert time.monotonic() < deadline, f"call {n} not dead: {handle.status()}"
                time.sleep(0.02)
            ids.append(handle.id)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=EXIT_TIMEOUT) == 0, log.read_text(errors="replace")
        client = app.broker.client
        k = queue_keys("dead_capped", "default")
        scores = [score for _, score in client.zrange(k.dead, 0, -1, withscores=True)]
        assert len(scores) == 5 and len(set(scores)) == 5, scores  # five, in one order
        letters = app.dead_letters()
        assert sorted(letter.task_id for letter in letters) == sorted(ids[3:])
        assert sorted(letter.args[0] for letter in letters) == [3, 4, 5, 6, 7]
        for gone in ids[:3]:  # everything a purge deletes is gone
            assert client.zscore(k.dead, gone) is None
            assert not client.hexists(k.dead_info, gone)
            assert not client.hexists(k.messages, gone)
        assert client.get(k.dead_trimmed) == b"3"
        said = [line for line in log.read_text(errors="replace").splitlines()
                if "dead_letters_max=5" in line]
        # three deletions within a minute: one line (the first), not one a deletion
        assert len(said) == 1 and "1 oldest dead letter(s) deleted" in said[0], said

        assert main(["status", "-A", "tests.apps.dead_capped", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["queues"]["default"]["dead"] == 5
        assert report["queues"]["default"]["dead_trimmed"] == 3
        assert main(["status", "-A", "tests.apps.dead_capped"]) == 0
        assert "3 dead letter(s) deleted, oldest first" in capsys.readouterr().out

        # what is left works as before: requeued, it runs (and dies) again; purged, gone
        assert app.requeue_dead(ids[3]) is True
        assert app.purge_dead(ids[4]) == 1
        assert sorted(letter.task_id for letter in app.dead_letters()) == sorted(ids[5:])
        _burst(processes, url, tmp_path / "again.log")
        assert sorted(letter.task_id for letter in app.dead_letters()) == sorted(
            [ids[3], *ids[5:]])
        assert client.get(k.dead_trimmed) == b"3"  # four kept: none deleted
        assert app.purge_dead(queue="default") == 4
        assert app.dead_letters() == []
    finally:
        app.close()
