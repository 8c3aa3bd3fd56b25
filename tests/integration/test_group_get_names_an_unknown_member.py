"""``GroupHandle.get()`` of a group one of whose members is known to be gone here
(forgotten through its handle) raises at once, as ``TaskHandle.get()`` does for an
unknown task, naming that member's task and why, on a real server. It raised "group X did not finish
within None s: {'succeeded': 99, 'unknown': 1}" instead: the member's own reason
dropped, its id nowhere, and over a few thousand members the counts (of the first
members only) did not even show it. The members' results are written as a worker's
ack leaves them, so the groups are quick to set up."""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Tuple

import pytest
import redis

from minitask import GroupHandle, Minitask, ResultTimeout, group
from minitask.broker.keys import queue_keys
from minitask.stores.result_pages import PAGE
from minitask.wire.message import Outcome
from minitask.wire.serializer import encode_outcome

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180),
              pytest.mark.app("unknownmember", on="server")]

#: What an at-once raise may take here: generous, for a loaded 2-core machine.
SLACK = 2.0


def finish(client: "redis.Redis[bytes]", app: Minitask, task_ids: Iterable[str]) -> None:
    """The tasks ``task_ids`` end as a worker's ack leaves them: message gone, result kept."""
    keys = queue_keys(app.name, "default")
    pipe = client.pipeline(transaction=False)
    for task_id in task_ids:
        pipe.rpush(keys.result(task_id), encode_outcome(
            Outcome("succeeded", 1_700_000_000_000, value=task_id, attempt=1)))
        pipe.hdel(keys.messages, task_id)
    pipe.execute()


def raised(wait: Callable[[], Any]) -> Tuple[float, str]:
    """How long ``wait`` took to raise ResultTimeout, and its message."""
    began = time.monotonic()
    with pytest.raises(ResultTimeout) as caught:
        wait()
    return time.monotonic() - began, str(caught.value)


def sent(app: Minitask, members: int) -> GroupHandle:
    add = app.task(name="unknown.add")(lambda x: x)
    return group(add.s(index) for index in range(members)).delay()


@pytest.mark.parametrize("members, lost", [(100, 50), (2_500, 2_200)])
def test_get_names_the_forgotten_member_and_why_at_once(
        app: Minitask, admin: "redis.Redis[bytes]", members: int, lost: int) -> None:
    handle = sent(app, members)
    finish(admin, app, (member.id for member in handle.handles))
    forgotten = handle.handles[lost]
    assert forgotten.forget()
    _, single = raised(forgotten.get)  # what a single handle says of it
    assert f"task {forgotten.id} is unknown" in single

    # timeout=0 reads one page at most: past it, it runs out before the unknown one
    for timeout in (None, 30.0) + ((0.0,) if lost < PAGE else ()):
        took, said = raised(lambda: handle.get(timeout=timeout))
        assert took < SLACK, (timeout, took, said)
        assert said.startswith(f"group {handle.id} can never finish: its task "
                               f"{lost + 1:,} of {members:,} "), said
        assert said.endswith(single), said
        assert "did not finish within" not in said, said


def test_a_nested_groups_unknown_member_is_named(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    add = app.task(name="unknown.add")(lambda x: x)
    handle = group(add.s(0), group(add.s(1), add.s(2)), add.s(3)).delay()
    inner = handle.handles[1]
    assert isinstance(inner, GroupHandle)
    tasks = [handle.handles[0], *inner.handles, handle.handles[2]]
    finish(admin, app, (task.id for task in tasks))
    assert handle.get(timeout=30) == [tasks[0].id, [tasks[1].id, tasks[2].id], tasks[3].id]

    assert inner.handles[1].forget()
    took, said = raised(lambda: handle.get(timeout=30))
    assert took < SLACK, (took, said)
    assert said.startswith(f"group {handle.id} can never finish: its task 3 of 4 "), said
    assert f"task {inner.handles[1].id} is unknown" in said, said


def test_a_timeout_is_kept_while_an_earlier_member_runs(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    """Members are waited for in order: one still queued before the unknown one holds
    the wait until its timeout, which says so, as before."""
    handle = sent(app, 20)
    finish(admin, app, (member.id for index, member in enumerate(handle.handles)
                        if index != 5))
    assert handle.handles[10].forget()
    took, said = raised(lambda: handle.get(timeout=0.5))
    assert 0.5 <= took < 0.5 + SLACK, (took, said)
    assert said.startswith(f"group {handle.id} did not finish within 0.5 s: "), said

    finish(admin, app, [handle.handles[5].id])  # the queued one ends: now it can never
    took, said = raised(lambda: handle.get(timeout=30))
    assert took < SLACK, (took, said)
    assert f"task {handle.handles[10].id} is unknown" in said, said
