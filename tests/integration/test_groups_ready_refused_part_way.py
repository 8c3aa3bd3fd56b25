"""A fair queue's count of grouped ready tasks (``flow:groups_ready``, which status and
the dashboard read) is never left too high by a script refused part way (issue 29,
probe29u's MEDIUM: 3 to 11 left after every task ran, for good).

Redis refuses a command inside a script as the script comes to it and keeps the writes
made before (an ACL changed while workers run). A fetch took its tasks out of their
groups' sets, then lowered the count once, at its end (the fair library's flush()): its
INCRBY refused, the count stayed up. A send joined a solo group's task counted before
its claim was written; a cancel or a purge took tasks out of their sets before lowering
the count. Now the count's write is asked about before the first write that owes it
(refused, nothing is taken), and a join counts its task last: a count under the tasks
goes at 0, never one over.

Fetches, sends, cancels and purges called as a worker or a client calls them, on the
test's own redis-server, as an ACL user from which one command is taken away.
"""
from __future__ import annotations

import random
import re
from functools import partial
from typing import Any, List, Optional, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.admin import purge_ready
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.refused_fetches import NOW, fetched
from tests.support.refused_part_way import fetched_while_refused
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "groupsready"
KEYS = QueueKeys(APP, "default")
#: a turn's '/' claim: a solo group's task held in its claim, counted as a set's
CLAIM = re.compile(rb"^-?\d+\.\d+/")


def _app(url: str) -> Tuple[Minitask, Any, Any, Any, Any]:
    app = Minitask(APP, broker=url)

    @app.task(name="fair", group_by="tenant", group_max_running=1)
    def fair(tenant: str, n: int) -> int:
        return n

    @app.task(name="paced", group_by="tenant", rate_limit="1000/s")
    def paced(tenant: str, n: int) -> int:
        return n

    @app.task(name="plain", group_by="tenant")
    def plain(tenant: str, n: int) -> int:
        return n

    @app.task(name="lim", rate_limit="1000/s", max_running=1)
    def lim(n: int) -> int:
        return n

    return app, fair, paced, plain, lim


def _count(admin: "redis.Redis[bytes]") -> Optional[int]:
    held = admin.get(KEYS.groups_ready)
    return None if held is None else int(held)


def _grouped(admin: "redis.Redis[bytes]") -> int:
    """The grouped ready tasks the count stands for: in the groups' ready sets, or held in
    a turn's '/' claim."""
    found = 0
    for key in admin.scan_iter(match=KEYS.flow_prefix + "g:*:ready", count=1000):
        found += admin.zcard(key)
    for key in admin.scan_iter(match=KEYS.flow_prefix + "g:*:turn", count=1000):
        claim = admin.hget(key, "tok")
        if claim and CLAIM.match(claim):
            found += 1
    return found


def _drain(app: Minitask, admin: "redis.Redis[bytes]", now_ms: int,
           fetches: int = 100) -> List[str]:
    """The ids delivered (each acked) until a fetch finds nothing and nothing is leased."""
    delivered: List[str] = []
    for _ in range(fetches):
        got = fetched(app, now_ms, 1_000)
        for task_id in got:
            delivered.append(task_id)
            app.broker.results.ack("default", task_id, None, 0)
        now_ms += 10  # the rate limits' windows pass
        if not got and admin.zcard(KEYS.leases) == 0:
            break
    return delivered


def _left(admin: "redis.Redis[bytes]") -> Tuple[Optional[int], Any]:
    return _count(admin), admin.zrange(KEYS.groups, 0, -1, withscores=True)


def _never_over(admin: "redis.Redis[bytes]", command: str, tick: int) -> None:
    counted = _count(admin) or 0
    assert (command, tick, counted <= _grouped(admin)) == (command, tick, True)


#: Commands a fetch (and the acks between) runs on the grouped tasks' way, each taken away
#: in turn: the count's own (incrby), the groups' (zincrby) and the writes around them.
COMMANDS = ["incrby", "zincrby", "del", "zrem", "zadd", "hset", "rpush", "hincrby", "hdel"]


@pytest.mark.parametrize("seed", range(3))
def test_fetches_refused_part_way_never_leave_the_count_over(
        server: RedisServer, admin: "redis.Redis[bytes]", seed: int) -> None:
    """Rounds of a queue mixing fair groups (of one task and of several; a slot each, a
    rate, none) and limited tasks, fetched five at a time with one command taken away
    after the first fetch: the count is never above the grouped tasks, and once every
    task ran it is gone."""
    url = user_without(admin, server, "nothing")
    app, fair, paced, plain, lim = _app(url)
    rng = random.Random(seed)
    now = NOW
    try:
        for command in COMMANDS:
            ids = []
            for n in range(rng.randrange(10, 20)):
                kind = rng.randrange(5)
                if kind == 0:
                    ids.append(fair.delay(rng.choice("abc") + command, n).id)
                elif kind == 1:
                    ids.append(plain.delay(rng.choice("xy") + command, n).id)
                elif kind == 2:
                    ids.append(paced.delay(rng.choice("de") + command, n).id)
                elif kind == 3:
                    ids.append(fair.delay(f"one{n}{command}", n).id)
                else:
                    ids.append(lim.delay(n).id)
            acked, now = fetched_while_refused(app, admin, [command], rng.randrange(0, 3) + 3,
                                               now, after=partial(_never_over, admin, command))
            delivered = acked + _drain(app, admin, now)
            now += 1_000
            assert (command, sorted(set(ids) - set(delivered))) == (command, [])
            assert (command, _left(admin)) == (command, (None, []))
    finally:
        app.close()


@pytest.mark.parametrize("again", [True, False], ids=["sent-again", "sent-once"])
@pytest.mark.parametrize("command", ["hincrby", "hset", "rpush", "zadd", "zincrby", "incrby"])
def test_a_grouped_send_refused_part_way_is_counted_once(
        server: RedisServer, admin: "redis.Redis[bytes]", command: str, again: bool) -> None:
    """A task sent to a group of none (a solo group of a group_max_running: held in its
    turn's claim, counted) while a command of the join is refused, then sent again with
    its task_id once the ACL is back, or not: once every task ran, no count is left."""
    url = user_without(admin, server, "nothing")
    app, fair, _, _, _ = _app(url)
    try:
        fair.delay("first", 0)  # (the ACL check before a client's first send)
        admin.execute_command("ACL", "SETUSER", "limited", f"-{command}")
        try:
            with pytest.raises(BrokerError):
                fair.apply_async(("solo", 1), task_id="t1")
        finally:
            admin.execute_command("ACL", "SETUSER", "limited", f"+{command}")
        if again:
            fair.apply_async(("solo", 1), task_id="t1")
        delivered = _drain(app, admin, NOW)
        assert delivered.count("t1") == (1 if again else 0)
        assert _left(admin) == (None, [])
    finally:
        app.close()


def test_a_cancel_refused_its_count_leaves_the_task_in_its_group(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """A grouped ready task's cancel refused the count's INCRBY: the task stays in its
    group (runs), and no count is left after."""
    url = user_without(admin, server, "nothing")
    app, fair, _, _, _ = _app(url)
    try:
        ids = [fair.delay("g", n).id for n in range(3)]
        admin.execute_command("ACL", "SETUSER", "limited", "-incrby")
        try:
            with pytest.raises(BrokerError):
                app.handle(ids[1]).cancel()
        finally:
            admin.execute_command("ACL", "SETUSER", "limited", "+incrby")
        assert _count(admin) == _grouped(admin) == 3
        assert sorted(_drain(app, admin, NOW)) == sorted(ids)
        assert _left(admin) == (None, [])
    finally:
        app.close()


def test_a_purge_refused_its_count_leaves_no_count(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """A purge of a fair queue refused the count's DECRBY: refused before the groups'
    tasks go, and the purge made again once the ACL is back leaves no count."""
    url = user_without(admin, server, "nothing")
    app, fair, _, plain, _ = _app(url)
    try:
        for n in range(4):
            fair.delay("g", n)
            plain.delay("h", n)
        admin.execute_command("ACL", "SETUSER", "limited", "-decrby")
        try:
            with pytest.raises(BrokerError):
                purge_ready(app, "default")
        finally:
            admin.execute_command("ACL", "SETUSER", "limited", "+decrby")
        assert _count(admin) == _grouped(admin)
        assert purge_ready(app, "default") == 8
        assert _left(admin) == (None, [])
    finally:
        app.close()
