"""Fair queues: this release writes every solo group's claim in the ``/`` form, the one
a minitask before the ``:`` form reads (readers first: lib.lua's PLAIN_SOLO_CLAIM).

A ``:`` claim (a solo group's task whose spec is plain, leased without its spec read)
is read by this release (tests/crash/test_fair_solo_claims_of_both_forms.py) but not
by an older worker, whose fetch leaves its token unserved: the task would be stranded
for ever during a rolling deploy (new senders, old workers) or after a rollback. So
both senders of a solo group (enqueue_group.lua's inline join, and flow.lua's join(),
taken while some group is paused) write ``/``, with a plain spec as with any other.
Each test runs on fakeredis and on the suite's own redis-server.
"""
from __future__ import annotations

import re
from typing import Callable, List

import redis

from minitask import Minitask
from minitask.admin import pause_group
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.fair import served, tenant_app

KEYS = QueueKeys("test", "default")
#: a solo claim as a minitask before the ':' form reads it (its fetch.lua's match)
SLASH_CLAIM = re.compile(rb"^-?\d+\.\d+/[0-9][ -~]*$")


def _solo_claims(client: "redis.Redis[bytes]", groups: List[str]) -> List[bytes]:
    return [client.hget(KEYS.fair_group(group, "turn"), "tok") or b"" for group in groups]


def _tokens(client: "redis.Redis[bytes]") -> List[bytes]:
    return [entry for ready in KEYS.ready for entry in client.lrange(ready, 0, -1)
            if entry.startswith(b"\xff")]


def test_every_solo_claim_this_release_writes_is_of_the_slash_form(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)  # plain: no limit, expiry or group limit
    client = app.broker.transport.client
    job.delay("A", 0)  # enqueue_group.lua's inline join
    job.delay_many([(f"M{n}", n) for n in range(3)])  # the same, several in one call
    job.apply_async(("P", 0), priority=9)
    pause_group(app, "default", "Z")  # a group paused: flow.lua's join() sends
    job.delay("F", 0)
    groups = ["A", "M0", "M1", "M2", "P", "F"]
    claims = _solo_claims(client, groups)
    assert all(SLASH_CLAIM.match(claim) for claim in claims), claims
    tokens = _tokens(client)
    assert sorted(tokens) == sorted(b"\xff" + claim + b"\xff" + group.encode()
                                    for claim, group in zip(claims, groups)), tokens
    # and this release serves them all, once each
    assert sorted(served(app, clock, 8)) == sorted(f"{group}0" if group[0] != "M" else
                                                   f"{group}{group[1]}" for group in groups)
