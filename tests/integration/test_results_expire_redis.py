"""Nothing is left behind once results expire: a real worker process on the suite's
redis-server runs plain, retried, dead, cancelled (queued and running) and progress-
reporting tasks, a chain over two queues and a chord, all with a result_ttl of two
seconds; once it has passed, every key left is one of the bounded ones that
docs/reference/keys.rst names (the registries, the metrics, the capped streams), no
key is named after a task or a group, and no queue structure holds a task id but the
dead letter, which is kept until an operator requeues or purges it (then none).

Its two seconds are short on a loaded machine: a chord's open group lives on (30 days
from its last member's outcome, docs/guide/workflows.rst), so a worker held up longer
than that between the chord's send and its members' ends still runs the body; once the
body is sent the group lives ``result_ttl`` and expires with the rest. The second run
stalls the worker (SIGSTOP) past the ttl to prove it."""
from __future__ import annotations

import re
import signal
import time
from typing import Any, Dict, List, Set

import pytest
import redis

import tests.apps.expiring as expiring
from minitask import chain, chord, group
from minitask.admin import recent
from tests.support.processes import Processes, exit_code, send
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

DEADLINE = 120.0
#: Every key that may outlive the tasks: bounded by the queues, the task names, the
#: workers or a cap, never by how many tasks ran (docs/reference/keys.rst).
BOUNDED = [
    r"minitask:\{expiring\}:queues",           # the queue registry
    r"minitask:\{expiring\}:metrics",          # counters by queue, task name, outcome
    r"minitask:\{expiring\}:throughput:\d+",   # one per minute, expires after two hours
    r"minitask:\{expiring:(default|other)\}:recent",   # capped (recent_outcomes)
    r"minitask:\{expiring:(default|other)\}:cancels",  # capped (about 1,000)
    r"minitask:\{expiring:(default|other)\}:sequence",  # one number
    # the longest lease its workers take: one member, written as each starts
    r"minitask:\{expiring:(default|other)\}:lease_longest",
]
#: A key named after a task or a group.
PER_TASK = re.compile(r":(result|progress|once|handle|group):([^:]+)")
#: What holds a dead letter until it is requeued or purged.
DEAD_LETTER = {"messages", "dead", "dead_info"}
#: Chords sent: one (its group must outlive a stalled worker: none is sent again).
CHORD_TRIES = 1
#: A chord's members (``exp.square``: run by nothing else).
MEMBERS = 5


def queue_part(key: str) -> str:
    """``minitask:{expiring:default}:dead`` -> ``dead``."""
    return key.split("}:", 1)[1] if "}:" in key else ""


def left(client: "redis.Redis[bytes]") -> List[str]:
    return sorted(key.decode() for key in client.scan_iter(match="minitask:*", count=1000))


def named_after(keys: List[str], ids: Set[str]) -> List[str]:
    return [key for key in keys if any(task_id in key for task_id in ids)]


def send_chord() -> Any:
    return chord(group(expiring.square.s(i) for i in range(MEMBERS)), expiring.total.s()).delay()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stall", [0.0, expiring.RESULT_TTL + 1], ids=["free", "stalled"])
def test_nothing_per_task_is_left_once_results_expire(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        processes: Processes, monkeypatch: pytest.MonkeyPatch, stall: float) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app = expiring.app
    app.close()  # connect again, to this server
    worker = processes.worker("tests.apps.expiring", "-Q", "default,other", "--pool",
                              "thread", "-c", "4", "--name", "w-expiring",
                              env={"MINITASK_BROKER_URL": redis_server.url})
    try:
        handles = [expiring.add.delay(1, 2), expiring.again.delay(),
                   expiring.stepped.delay(3)]
        dead = expiring.boom.delay()
        queued = expiring.add.apply_async((5, 5), delay=3600)
        assert queued.cancel()
        running = expiring.long.delay("expiring")
        wait_until(lambda: running.status() == "running", timeout=DEADLINE,
                   message="the long task's start")
        assert running.cancel(running=True)
        chained = chain(expiring.add.s(1, 1), expiring.mul.s(3), expiring.add.s(4)).delay()
        chords = [send_chord()]
        if stall:  # as a loaded machine may: the worker runs nothing for a while
            send(worker, signal.SIGSTOP)
            time.sleep(stall)
            send(worker, signal.SIGCONT)

        # every outcome, from the record of recent outcomes (a result read later
        # than two seconds after it was written would be gone already)
        expected = {**{h.id: "succeeded" for h in handles + [chained]},
                    dead.id: "dead", running.id: "cancelled"}

        def ended() -> bool:
            states: Dict[str, str] = {}
            members = 0  # chord members ended, of every chord sent
            for entry in recent(app).tasks:  # newest first: a task's last outcome
                members += entry.name == "exp.square" and entry.task_id not in states
                states.setdefault(entry.task_id, entry.state)
            body = chords[-1]
            if (members == MEMBERS * len(chords) and body.id not in states
                    and body.status() in ("cancelled", "unknown")):
                # every member ended, the body never ran: its group expired first
                assert len(chords) < CHORD_TRIES, "the chord's group expired first"
                chords.append(send_chord())
            return (all(states.get(task_id) == state for task_id, state in expected.items())
                    and states.get(chords[-1].id) == "succeeded")

        wait_until(ended, timeout=DEADLINE, message="every task's outcome")
        assert dead.status() == "failed"  # a dead letter: kept
        ids = {h.id for h in handles + [dead, queued, running, chained] + chords}
        during = left(admin)
        assert named_after(during, ids), "the results were never written"
        # and every step's, member's and group's id, as the keys named them
        ids |= {found.group(2) for found in map(PER_TASK.search, during) if found}
        send(worker, 15)  # SIGTERM: the worker ends, and unregisters
        assert exit_code(worker) == 0

        def expired() -> bool:
            keys = left(admin)
            return not any(PER_TASK.search(key) for key in keys)

        wait_until(expired, timeout=expiring.RESULT_TTL + 30,
                   message="every result and workflow record expired")
        keys = left(admin)
        per_queue: Dict[str, str] = {key: queue_part(key) for key in keys}
        others = [key for key in keys if not any(re.fullmatch(p, key) for p in BOUNDED)]
        # the dead letter only: kept until an operator requeues or purges it
        assert {per_queue[key] for key in others} <= DEAD_LETTER, others
        assert named_after(keys, ids) == []
        for key in others:
            kind = admin.type(key).decode()
            members = (admin.hkeys(key) if kind == "hash" else admin.zrange(key, 0, -1))
            assert [m.decode() for m in members] == [dead.id], (key, members)

        assert app.purge_dead(dead.id) == 1
        keys = left(admin)
        assert all(any(re.fullmatch(p, key) for p in BOUNDED) for key in keys), keys
        assert [key for key in keys if key.endswith((":recent", ":cancels"))], (
            "the capped streams are kept, and bounded")
    finally:
        app.close()
