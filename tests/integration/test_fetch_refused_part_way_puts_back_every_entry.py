"""A fetch refused part way puts back every entry it popped (issue 29, review29o).

An ACL changed while a worker runs makes Redis refuse a command inside fetch.lua after
its pops, and Redis keeps what the script wrote before (no rollback). fetch.lua put back
only the id whose lease (ZADD) was refused: at prefetch 5 the four others popped by the
same ``LPOP key 5`` were stranded (their messages kept, no ready list holding them), and
a fair queue's solo group, popped as its token, was put back as its task's id, the token
and its group's claim lost. Now every popped entry that was not leased goes back to the
head of its ready list, in its order, the token as the token; one leased before the
refusal (HINCRBY, the delivery count, refused after the lease) stays leased and is
delivered again once its lease expires. Each task is then delivered exactly once.

Fetches called as a worker calls them (``QueueStore.fetch``), with their clock given,
on the test's own redis-server with an ACL user whose rules change between fetches.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.refused_fetches import NOW, fetched
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "partway"
KEYS = QueueKeys(APP, "default")
READY = KEYS.ready[4]  # the default priority's list (KEYS[11] in fetch.lua)


def _app(url: str) -> Tuple[Minitask, Any, Any]:
    app = Minitask(APP, broker=url)

    @app.task(name="plain")
    def plain(n: int) -> int:
        return n

    @app.task(name="grouped", group_by="tenant")
    def grouped(tenant: str, n: int) -> int:
        return n

    return app, plain, grouped


def _state(admin: "redis.Redis[bytes]") -> Dict[str, Any]:
    return {"ready": admin.lrange(READY, 0, -1), "claims": admin.hgetall(KEYS.groups_solo),
            "messages": sorted(admin.hkeys(KEYS.messages))}


@pytest.mark.parametrize("kind", ["plain", "grouped"])
@pytest.mark.parametrize("command", ["zadd", "hincrby"])
def test_a_fetch_refused_part_way_puts_back_every_popped_entry(
        server: RedisServer, admin: "redis.Redis[bytes]", kind: str, command: str) -> None:
    """zadd: the first lease refused; hincrby: refused after the first lease."""
    url = user_without(admin, server, "nothing")
    app, plain, grouped = _app(url)
    try:
        if kind == "plain":
            ids = [plain.delay(n).id for n in range(6)]
        else:
            ids = [grouped.delay(f"t{n}", n).id for n in range(6)]
        before = _state(admin)
        assert len(before["ready"]) == 6
        admin.execute_command("ACL", "SETUSER", "limited", f"-{command}")
        with pytest.raises(BrokerError) as refused:
            fetched(app, NOW, lease_ms=1_000)
        assert "NOPERM" in str(refused.value) or command in str(refused.value).lower()
        after = _state(admin)
        leased = [member.decode() for member in admin.zrange(KEYS.leases, 0, -1)]
        if command == "zadd":
            # every popped entry back, in its place and order: ids, or the groups' tokens
            # (with their claims)
            assert after == before
        else:
            # the first leased before HINCRBY was refused (its group's token served, its
            # claim gone: test_fetch_refused_part_way_solo_claims.py); the other four
            # popped with it back at the head, in their order, before the one never popped
            assert leased == ids[:1]
            assert after["ready"] == before["ready"][1:]
            assert after["claims"] == {group: claim for group, claim in before["claims"].items()
                                       if group != b"t0"}
        assert leased == ([] if command == "zadd" else ids[:1])

        admin.execute_command("ACL", "SETUSER", "limited", f"+{command}")
        delivered: List[str] = []
        now = NOW + 2_000  # the refused fetch's lease (1 s) has expired
        for _ in range(10):
            got = fetched(app, now)
            if not got:
                break
            delivered += got
            now += 1
        assert sorted(delivered) == sorted(ids)  # every task, each exactly once
        assert admin.llen(READY) == 0
    finally:
        app.close()


@pytest.mark.parametrize("command", ["zadd", "hincrby"])
def test_a_group_s_token_kept_in_hand_goes_back(
        server: RedisServer, admin: "redis.Redis[bytes]", command: str) -> None:
    """One group's backlog: its token, alone in its list, is served again and again in
    place of a pop (flow.lua's serve() keeps it in hand), and a refusal then lost it
    with the group's every task; now it goes back as serve(false) puts it, and each task
    is delivered (its first, leased before HINCRBY was refused, once its lease expired)."""
    url = user_without(admin, server, "nothing")
    app, _, grouped = _app(url)
    try:
        ids = [grouped.delay("t", n).id for n in range(6)]  # (in its set form)
        assert admin.llen(READY) == 1
        admin.execute_command("ACL", "SETUSER", "limited", f"-{command}")
        with pytest.raises(BrokerError):
            fetched(app, NOW, lease_ms=1_000)
        ready = admin.lrange(READY, 0, -1)
        # the group's token back; a task taken from its group's set whose lease was
        # refused goes to its ready list as its id (it joins its group again when popped)
        assert [entry for entry in ready if entry.startswith(b"\xff")] != []
        assert [entry for entry in ready if not entry.startswith(b"\xff")] == (
            [ids[0].encode()] if command == "zadd" else [])

        admin.execute_command("ACL", "SETUSER", "limited", f"+{command}")
        delivered: List[str] = []
        now = NOW + 2_000  # every lease taken so far has expired
        for _ in range(20):
            got = fetched(app, now)
            delivered += got
            now += 1
            if not got and admin.llen(READY) == 0:
                break
        assert sorted(delivered) == sorted(ids)  # none stranded, each once
    finally:
        app.close()
