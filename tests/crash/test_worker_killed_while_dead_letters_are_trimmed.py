"""A worker SIGKILLed while its dead-letterings trim the queue's dead letters loses no
task, no count and no part of a dead letter (issue 29: the missing crash test).

A dead-lettering (bury.lua) deletes the oldest dead letters of a queue over its
``dead_letters_max``, at most 100 a call, counting them in ``dead_trimmed`` before it
deletes them, each with every part purge_dead.lua deletes: its dead entry, its reason
(dead_info), its message and its flow spec (flow_dead). Here the dead list holds
thousands of planted letters over a max of 50, so that each dead-lettering of the
killed workers deletes 100; a worker is killed while it dead-letters a stream of
failing tasks, three times, then one more is started and left to finish. After each
kill and at the end every task sent is dead-lettered (its letter kept, or deleted by
a trim) or waits to run, the count equals the letters gone, no letter is left in
part and the oldest went first; the last worker serves and trims on.

A real redis-server of this test and real worker processes of tests/apps/dead_trimming.py.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List, Set

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.apps.dead_trimming import DEAD_MAX
from tests.support.processes import Processes, kill_group
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.crash, pytest.mark.timeout(420)]

APP = "dead_trimming"
KEYS = QueueKeys(APP, "default")
#: Bound on every wait for a worker's work (s), on a loaded 2-core machine.
DEADLINE = 120.0
#: Dead letters planted over the max (50): more than the killed workers' dead-letterings
#: can delete (KILLS * BATCH at most, 100 each), so that each of them deletes 100; the
#: last worker's delete the rest, then letters of the tasks sent.
PLANTED = 40_000
#: Workers killed, one after the other, each while it dead-letters.
KILLS = 3
#: Failing tasks sent before each kill, and after the last.
BATCH = 120
#: Trimmed letters a worker is seen to have deleted before it is killed: two calls'
#: for the first, four for the second, ...: kills at different points of the stream.
SEEN = 200


def _plant(admin: "redis.Redis[bytes]", now_ms: int) -> List[str]:
    """PLANTED dead letters, each with all four parts, dated an hour ago and before (the
    oldest first; none past the app's dead_letters_ttl); their ids, oldest first."""
    ids = [f"planted-{n:05d}" for n in range(PLANTED)]
    pipe = admin.pipeline(transaction=False)
    for n, task_id in enumerate(ids):
        pipe.zadd(KEYS.dead, {task_id: now_ms - 3_600_000 - PLANTED + n})
        pipe.hset(KEYS.dead_info, task_id, b"planted reason")
        pipe.hset(KEYS.messages, task_id, b"planted message")
        pipe.hset(KEYS.flow_dead, task_id, b"planted flow spec")
        if n % 2_000 == 1_999:
            pipe.execute()
    pipe.execute()
    return ids


def _trimmed(admin: "redis.Redis[bytes]") -> int:
    return int(admin.get(KEYS.dead_trimmed) or 0)


def _buried(admin: "redis.Redis[bytes]", sent: List[str]) -> Set[str]:
    """The tasks sent that were dead-lettered: each has a result (bury.lua writes its
    outcome; it fails at once, so nothing else does)."""
    pipe = admin.pipeline(transaction=False)
    for task_id in sent:
        pipe.exists(KEYS.result(task_id))
    return {task_id for task_id, held in zip(sent, pipe.execute()) if held}


def _all_accounted(admin: "redis.Redis[bytes]", planted: List[str], sent: List[str]) -> int:
    """Checks the queue as a kill left it (or the last worker): every dead letter is whole
    or wholly gone, those gone are the oldest and are counted, and every task sent is
    dead-lettered (kept, or gone and counted) or still to run. Returns how many it
    found gone."""
    dead: Dict[str, float] = {member.decode(): score for member, score in
                              admin.zrange(KEYS.dead, 0, -1, withscores=True)}
    reasons = {field.decode() for field in admin.hkeys(KEYS.dead_info)}
    messages = {field.decode() for field in admin.hkeys(KEYS.messages)}
    specs = {field.decode() for field in admin.hkeys(KEYS.flow_dead)}
    leased = {member.decode() for member in admin.zrange(KEYS.leases, 0, -1)}
    ready = {entry.decode() for key in KEYS.ready for entry in admin.lrange(key, 0, -1)}
    buried = _buried(admin, sent)
    assert set(dead) <= set(planted) | buried
    gone = [task_id for task_id in planted if task_id not in dead] + [
        task_id for task_id in sent if task_id in buried and task_id not in dead]
    # the count: every letter gone was counted, and none counted that is not gone
    counted = _trimmed(admin)
    assert counted == len(gone), (counted, len(gone))
    # no letter in part: a letter kept has its reason and message (a planted one its
    # flow spec too); a letter gone has none of its parts left
    assert [task_id for task_id in dead if task_id not in reasons] == []
    assert [task_id for task_id in dead if task_id not in messages] == []
    assert [task_id for task_id in planted if task_id in dead and task_id not in specs] == []
    assert [task_id for task_id in gone
            if task_id in reasons or task_id in messages or task_id in specs] == []
    assert reasons <= set(dead)  # no reason of a letter gone
    # no task lost: one not dead-lettered yet waits, ready or leased, with its message
    assert [task_id for task_id in sent if task_id not in buried and not (
        task_id in messages and (task_id in ready or task_id in leased))] == []
    # the oldest went first: the planted letters gone are the oldest planted, and no
    # task sent (each newer than every planted letter) went while a planted one is left
    planted_gone = [task_id for task_id in planted if task_id not in dead]
    assert planted_gone == planted[:len(planted_gone)]
    if len(planted_gone) < len(planted):
        assert [task_id for task_id in sent if task_id in buried and task_id not in dead
                ] == []
    return len(gone)


def _finished(admin: "redis.Redis[bytes]", sent: List[str]) -> bool:
    """Every task sent was dead-lettered, and none is leased."""
    return len(_buried(admin, sent)) == len(sent) and admin.zcard(KEYS.leases) == 0


def test_a_worker_killed_while_trimming_dead_letters_loses_no_task_nor_count(
        processes: Processes, server: RedisServer, tmp_path: Path) -> None:
    admin: "redis.Redis[bytes]" = server.client()
    app = Minitask(APP, broker=server.url, dead_letters_max=DEAD_MAX)
    fails = app.task(retries=0, name="fails")(lambda n: None)
    adds = app.task(name="adds")(lambda x, y: x + y)
    env = {"MINITASK_BROKER_URL": server.url}
    try:
        planted = _plant(admin, int(time.time() * 1000))
        sent: List[str] = []
        waiting: List[int] = []
        for kill in range(KILLS):
            log = tmp_path / f"worker-{kill}.log"
            worker = processes.worker("tests.apps.dead_trimming", "-c", "4", env=env, log=log)
            before = _trimmed(admin)
            sent += [fails.delay(n).id for n in range(BATCH)]
            wait_until(lambda: _trimmed(admin) >= before + SEEN * (kill + 1)
                       or worker.poll() is not None,
                       timeout=DEADLINE, interval=0.005,
                       message=f"worker {kill} to trim dead letters")
            assert worker.poll() is None, log.read_text(errors="replace")
            kill_group(worker)
            assert _all_accounted(admin, planted, sent) > 0
            waiting.append(len(sent) - len(_buried(admin, sent)))
        print(f"tasks not yet dead-lettered at each kill: {waiting}")

        at_last_kill = _trimmed(admin)
        log = tmp_path / "worker-last.log"
        processes.worker("tests.apps.dead_trimming", "-c", "4", env=env, log=log)
        sent += [fails.delay(n).id for n in range(BATCH)]
        # the restarted worker carries on: serves a task that succeeds, dead-letters
        # the killed workers' tasks (their leases expired) and the new ones
        assert adds.delay(2, 3).get(timeout=DEADLINE) == 5, log.read_text(errors="replace")
        wait_until(lambda: _finished(admin, sent), timeout=DEADLINE, interval=0.2,
                   message="every task sent to be dead-lettered")
        assert len(set(sent)) == len(sent) == KILLS * BATCH + BATCH
        assert _all_accounted(admin, planted, sent) >= at_last_kill + BATCH  # it trimmed too
        # nothing held: no task ready, delayed or leased
        assert [admin.llen(key) for key in KEYS.ready] == [0] * len(KEYS.ready)
        assert admin.zcard(KEYS.delayed) == 0 and admin.zcard(KEYS.leases) == 0
    finally:
        app.close()
        admin.close()
