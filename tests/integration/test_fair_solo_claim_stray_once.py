"""A plain solo group's token its claim no longer names, popped, hands its task back
to its group only when the task is nowhere else (probe 29): a token planted twice
(its task leased by the first) or a claim moved to another generation serves each
task once, never twice, and leaves no key behind. On fakeredis and the suite's own
redis-server.
"""
from __future__ import annotations

from typing import Callable

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.fair import served, tenant_app

KEYS = QueueKeys("test", "default")


def test_a_token_planted_twice_never_serves_its_leased_task_again(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay("A", 0)
    tokens = client.lrange(KEYS.ready[9 - 5], 0, -1)
    assert len(tokens) == 1
    client.rpush(KEYS.ready[9 - 5], tokens[0])  # the same token twice
    assert served(app, clock, 3) == ["A0"]  # the second: stale, its task leased
    job.delay("A", 1)  # the group goes on
    assert served(app, clock, 2) == ["A1"]
    assert not client.keys("*:g:*") and not client.exists(KEYS.groups_solo)


def test_a_claim_of_another_generation_lifted_serves_its_task_once(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    job.delay("A", 0)
    claim = client.hget(KEYS.groups_solo, "A")
    assert claim is not None
    client.hset(KEYS.groups_solo, "A", claim.replace(b".1:", b".7:", 1))
    job.delay_many([("A", 1), ("A", 2)])  # the group takes its set form
    assert sorted(served(app, clock, 6)) == ["A0", "A1", "A2"]
    assert not client.keys("*:g:*") and not client.exists(KEYS.groups_solo)


def test_a_claim_planted_for_a_group_with_no_token_strands_no_task_joining_it(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)
    client = app.broker.transport.client
    client.hset(KEYS.groups_solo, "A", "1700000000000.1:5ghost")  # no token anywhere
    job.delay_many([("A", 0), ("A", 1)])
    assert sorted(served(app, clock, 6)) == ["A0", "A1"]
    assert not client.keys("*:g:*") and not client.exists(KEYS.groups_solo)
