"""A worker SIGKILLed while its dead-letterings trim the queue's dead letters loses no
task, no count and no part of a dead letter (issue 29: the missing crash test).

A dead-lettering (bury.lua) deletes the oldest dead letters of a queue over its
``dead_letters_max``, at most 100 a call, counting them in ``dead_trimmed`` before it
deletes them, each with every part purge_dead.lua deletes: its dead entry, its reason
(dead_info), its message and its flow spec (flow_dead). Here the dead list holds
thousands of planted letters over a max of 50, so that each dead-lettering of the
worker deletes 100; the worker is killed while it dead-letters a stream of failing
tasks, three times, then one more is started and left to finish. Afterwards every
task sent is dead-lettered or was deleted by a trim, the count equals the letters
gone, no letter is left in part, the oldest went first, and the last worker serves.

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
#: Dead letters planted over the max: more than every dead-lettering of the test
#: can delete (100 each), so that each deletes 100 (the max is 50).
PLANTED = 30_000
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


def _finished(admin: "redis.Redis[bytes]", sent: List[str]) -> bool:
    """Every task sent has a result (bury.lua writes its outcome) and none is leased."""
    results = [KEYS.result(task_id) for task_id in sent]
    held = sum(admin.exists(*results[i:i + 500]) for i in range(0, len(results), 500))
    return held == len(sent) and admin.zcard(KEYS.leases) == 0


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
        in_flight: List[int] = []
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
            in_flight.append(BATCH * (kill + 1) - sum(
                admin.exists(KEYS.result(task_id)) for task_id in sent))
        print(f"tasks not yet dead-lettered at each kill: {in_flight}")

        at_last_kill = _trimmed(admin)
        log = tmp_path / "worker-last.log"
        processes.worker("tests.apps.dead_trimming", "-c", "4", env=env, log=log)
        sent += [fails.delay(n).id for n in range(BATCH)]
        # the restarted worker carries on: serves a task that succeeds, dead-letters
        # the killed workers' tasks (their leases expired) and the new ones
        assert adds.delay(2, 3).get(timeout=DEADLINE) == 5, log.read_text(errors="replace")
        wait_until(lambda: _finished(admin, sent), timeout=DEADLINE, interval=0.2,
                   message="every task sent to be dead-lettered")
        assert _trimmed(admin) >= at_last_kill + BATCH  # it trimmed too

        dead: Dict[str, float] = {member.decode(): score for member, score in
                                  admin.zrange(KEYS.dead, 0, -1, withscores=True)}
        reasons: Set[str] = {field.decode() for field in admin.hkeys(KEYS.dead_info)}
        messages: Set[str] = {field.decode() for field in admin.hkeys(KEYS.messages)}
        specs: Set[str] = {field.decode() for field in admin.hkeys(KEYS.flow_dead)}
        assert set(dead) <= set(planted) | set(sent)
        assert len(set(sent)) == len(sent) == KILLS * BATCH + BATCH
        gone = [task_id for task_id in planted + sent if task_id not in dead]
        # the count: every letter gone was counted, and none counted that is not gone
        counted = _trimmed(admin)
        assert counted == len(gone), (counted, len(gone))
        # no letter in part: a letter kept has its reason and message (a planted one its
        # flow spec too); a letter gone has none of its parts left
        assert [task_id for task_id in dead if task_id not in reasons] == []
        assert [task_id for task_id in dead if task_id not in messages] == []
        assert [task_id for task_id in planted if task_id in dead and task_id not in specs
                ] == []
        assert [task_id for task_id in gone
                if task_id in reasons or task_id in messages or task_id in specs] == []
        assert reasons <= set(dead)  # no reason of a letter gone
        # the oldest went first: the planted letters gone are the oldest planted, and no
        # task sent (each newer than every planted letter) went while a planted one is left
        planted_gone = [task_id for task_id in planted if task_id not in dead]
        assert planted_gone == planted[:len(planted_gone)]
        if len(planted_gone) < len(planted):
            assert [task_id for task_id in sent if task_id not in dead] == []
        # nothing held: no task ready, delayed or leased
        assert [admin.llen(key) for key in KEYS.ready] == [0] * len(KEYS.ready)
        assert admin.zcard(KEYS.delayed) == 0 and admin.zcard(KEYS.leases) == 0
    finally:
        app.close()
        admin.close()
