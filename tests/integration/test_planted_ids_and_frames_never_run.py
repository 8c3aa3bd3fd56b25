"""Planted messages a worker must dead-letter before it runs them (issue 29, probe 15).

* An id of 2 MB (no producer sends one over ``MAX_ID_BYTES``, 200 bytes): it ran and
  succeeded, and its id filled a 2 MB worker log line, a 2 MB entry of the record of
  recent outcomes (``inspect recent`` printed it whole) and a 2 MB result key name.
  Now the fetch that pops it drops it unread (fetch.lua: an entry longer than any id
  minitask writes), said once in the worker's log naming its list and length: it never
  runs, and is never written anywhere else (no dead letter, no result key).
* A workflow frame (field ``wf``) minitask never writes (undecodable bytes, or a map
  of the right version lacking ``max``): the task RAN first, and was dead-lettered
  after (its side effect done, and done again by a requeue), the second as "internal
  error: KeyError: 'max'" of an "(undecodable)" task. Now the frame is read as the
  message is decoded, and the message dead-lettered, naming the field, never run.

A real redis-server, a real worker process of tests.apps.foreign (each pool), and
the ``minitask`` command, as an operator runs it.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List

import msgpack  # type: ignore[import-untyped]
import pytest

from minitask.broker.keys import queue_keys
from tests.apps.foreign import build
from tests.support.processes import Processes, exit_code
from tests.support.reports import did_fail
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

#: Generous for a loaded 2-core machine: each task ends in milliseconds.
DEADLINE = 60.0
OTHER = queue_keys("foreign", "other")
#: Under max_message_bytes with its envelope (a longer message is dead-lettered unread,
#: for its length, before its id is read: tests/integration/test_huge_message_not_read_by_fetch.py)
LONG_ID = "L" * 500_000
#: The longest line a view of the planted id may print: far below its 500 kB.
LINE_MOST = 20_000


def envelope(task_id: str, token: str, **changes: Any) -> bytes:
    """A message of task ``mark`` (queue ``other``) that marks ``token`` if it runs."""
    fields: Dict[str, Any] = {
        "v": 1, "id": task_id, "task": "mark", "args": [token], "kwargs": {},
        "queue": "other", "priority": 5, "enqueued_at_ms": int(time.time() * 1000),
        "eta_ms": None, "attempt": 1}
    fields.update(changes)
    return msgpack.packb(fields, use_bin_type=True)  # type: ignore[no-any-return]


def longest_line(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_an_overlong_id_or_a_broken_frame_is_dead_lettered_and_never_runs(
        pool: str, redis_server: Any, admin: Any, processes: Processes, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    app = build(redis_server.url)
    planted = {
        LONG_ID: envelope(LONG_ID, "long-id"),
        "wf-junk": envelope("wf-junk", "wf-junk", wf=b"\xc1\xc1"),
        "wf-nomax": envelope("wf-nomax", "wf-nomax",
                             wf=msgpack.packb({"v": 1, "next": [1, 2]}, use_bin_type=True)),
        "wf-next": envelope("wf-next", "wf-next", wf=msgpack.packb(
            {"v": 1, "next": {"k": "then", "node": "x"}, "err": [], "max": 1000},
            use_bin_type=True)),
    }
    now_ms = int(time.time() * 1000)
    assert app.broker.queues.enqueue(
        "other", [(task_id, body, 5, 0) for task_id, body in planted.items()],
        now_ms) == len(planted)
    env = {"MINITASK_BROKER_URL": redis_server.url}
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.foreign", "--pool", pool, "-c", "1", "-Q", "other",
                              env=env, log=log)
    try:
        sound = uuid.uuid4().hex
        app.tasks["mark"].delay(sound)
        wait_until(lambda: sound.encode() in admin.lrange("marks:other", 0, -1),
                   timeout=DEADLINE, message="the sound task, sent after the planted ones")
        # the overlong id is dropped by the fetch that pops it, unread (fetch.lua: no id
        # minitask writes is over MAX_ID_BYTES), said once naming its list and length
        framed = {task_id: body for task_id, body in planted.items() if task_id != LONG_ID}
        wait_until(lambda: admin.zcard(OTHER.dead) == len(framed), timeout=DEADLINE,
                   message="the planted messages dead-lettered")
        assert admin.lrange("marks:other", 0, -1) == [sound.encode()]  # none of them ran
        letters = {letter.task_id: letter for letter in app.dead_letters(limit=10)}
        assert sorted(letters) == sorted(framed)
        for letter in letters.values():
            assert letter.reason == "the message cannot be decoded"
            assert letter.exc_type == "DecodeError"
            assert len(letter.message) < LINE_MOST
        assert "field 'wf'" in letters["wf-junk"].message
        assert "field 'max' is missing" in letters["wf-nomax"].message
        assert "field 'next'" in letters["wf-next"].message
        assert not admin.exists(OTHER.result(LONG_ID))  # no 500 kB key name
        # the sound task's outcome is recorded by its ack, after its mark: waited for
        wait_until(lambda: len(admin.xrange(OTHER.recent)) == len(framed) + 1,
                   timeout=DEADLINE, message="an outcome recorded for each task")
        entries = admin.xrange(OTHER.recent)
        assert max(len(value) for _, fields in entries for value in fields.values()) < 2000
        shown: List[str] = []
        for words in (("inspect", "recent"), ("dead", "list")):
            done = subprocess.run(
                [sys.executable, "-m", "minitask", words[0], "-A", "tests.apps.foreign",
                 *words[1:]], cwd=processes.cwd, env={**processes.env, **env},
                capture_output=True, timeout=DEADLINE)
            assert done.returncode == 0, done.stderr[-2000:]
            shown.append(done.stdout.decode())
            assert longest_line(shown[-1]) < LINE_MOST, words
        assert "L" * 1000 not in shown[0] + shown[1]
        wait_until(lambda: "wf-next" in log.read_text(errors="replace"), timeout=DEADLINE,
                   message="the dead letters logged")
        assert longest_line(log.read_text(errors="replace")) < LINE_MOST
        assert f"key {OTHER.ready[4]}: an entry of 500,000 bytes" in log.read_text(
            errors="replace")
        assert "KeyError" not in log.read_text(errors="replace")
        worker.send_signal(signal.SIGTERM)
        assert exit_code(worker) == 0
    finally:
        app.close()
        if did_fail(request):
            print(log.read_text(errors="replace")[-6000:])
