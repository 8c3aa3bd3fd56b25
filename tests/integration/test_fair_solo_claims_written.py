"""Fair queues: both senders of a solo group (enqueue_group.lua's inline join, and
flow.lua's join(), taken while some group is paused) write its claim in the ``:`` form
for a task whose spec is plain (no limit, expiry or group limit: lib.lua's
PLAIN_SOLO_CLAIM), kept in the queue's ``groups_solo`` only, which a fetch leases
without reading its spec, and in the ``/`` form in its turn for any other spec, whose
spec the fetch reads
(tests/crash/test_fair_solo_claims_of_both_forms.py reads both).
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
#: a solo claim of a plain spec, and of any other (fetch.lua's match)
PLAIN_CLAIM = re.compile(rb"^-?\d+\.\d+:[0-9][ -~]*$")
SLASH_CLAIM = re.compile(rb"^-?\d+\.\d+/[0-9][ -~]*$")


def _solo_claims(client: "redis.Redis[bytes]", groups: List[str]) -> List[bytes]:
    """Each group's claim: in groups_solo (a plain task's, its one key), or its turn's."""
    return [client.hget(KEYS.groups_solo, group)
            or client.hget(KEYS.fair_group(group, "turn"), "tok") or b"" for group in groups]


def _tokens(client: "redis.Redis[bytes]") -> List[bytes]:
    return [entry for ready in KEYS.ready for entry in client.lrange(ready, 0, -1)
            if entry.startswith(b"\xff")]


def test_a_plain_specs_solo_claim_is_of_the_plain_form_and_any_others_of_the_slash_form(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, job = tenant_app(make_app)  # plain: no limit, expiry or group limit
    client = app.broker.transport.client
    job.delay("A", 0)  # enqueue_group.lua's inline join
    job.delay_many([(f"M{n}", n) for n in range(3)])  # the same, several in one call
    job.apply_async(("P", 0), priority=9)
    pause_group(app, "default", "Z")  # a group paused: flow.lua's join() sends
    job.delay("F", 0)
    job.apply_async(("L", 0), expires=3600)  # a spec with an expiry
    groups = ["A", "M0", "M1", "M2", "P", "F", "L"]
    claims = _solo_claims(client, groups)
    assert all(PLAIN_CLAIM.match(claim) for claim in claims[:-1]), claims
    assert SLASH_CLAIM.match(claims[-1]), claims
    # a ':' claim is in groups_solo only: its group has no turn; a '/' claim is its turn's
    assert sorted(client.hkeys(KEYS.groups_solo)) == sorted(g.encode() for g in groups[:-1])
    assert [client.exists(KEYS.fair_group(g, "turn")) for g in groups] == [0] * 6 + [1]
    tokens = _tokens(client)
    assert sorted(tokens) == sorted(b"\xff" + claim + b"\xff" + group.encode()
                                    for claim, group in zip(claims, groups)), tokens
    # and the fetch serves them all, once each
    assert sorted(served(app, clock, 9)) == sorted(f"{group}0" if group[0] != "M" else
                                                   f"{group}{group[1]}" for group in groups)
