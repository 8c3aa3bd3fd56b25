"""``GroupHandle.get(timeout=...)`` ends on time whatever the group's size, on a real
server. It waited for its members one after the other, a round trip each even for
results already there, and counted every member's status for its message: with
20,000 members, 19,999 of them done, ``get(timeout=0.5)`` raised after 6 s (10 s on
a loaded machine). The members are sent with no worker running, and their results
written as an ack leaves them, so the group is quick to set up."""
from __future__ import annotations

import re
import time
from typing import Any, Callable, List, Tuple

import pytest
import redis

from minitask import GroupHandle, Minitask, ResultTimeout, group
from minitask.broker.keys import queue_keys
from minitask.wire.message import Outcome
from minitask.wire.serializer import encode_outcome

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240),
              pytest.mark.app("biggroup", on="server")]

MEMBERS = 20_000
TIMEOUT = 0.5
#: What a wait may take past its timeout here: generous, for a loaded 2-core machine
#: (a page's read, one look at a member, the counts its message gives: 0.3 s idle).
SLACK = 1.5
DEADLINE = 60.0


def value(index: int) -> List[Any]:
    return [index, f"member-{index}"]


def finish(client: "redis.Redis[bytes]", app: Minitask, handle: GroupHandle,
           indexes: range) -> None:
    """Members ``indexes`` of ``handle`` end as a worker's ack leaves them: their message
    gone from the queue, their result kept."""
    keys = queue_keys(app.name, "default")
    pipe = client.pipeline(transaction=False)
    for index in indexes:
        task_id = handle.handles[index].id
        pipe.rpush(keys.result(task_id), encode_outcome(
            Outcome("succeeded", 1_700_000_000_000, value=value(index), attempt=1)))
        pipe.hdel(keys.messages, task_id)
    pipe.execute()


def ran_out(wait: Callable[[], Any]) -> Tuple[float, str]:
    """How long ``wait`` took to raise ResultTimeout, and its message."""
    began = time.monotonic()
    with pytest.raises(ResultTimeout) as raised:
        wait()
    return time.monotonic() - began, str(raised.value)


def test_a_big_groups_get_ends_within_its_timeout_and_returns_every_result_when_done(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    add = app.task(name="big.add")(lambda x, y: [x, y])
    handle = group(add.s(index, index) for index in range(MEMBERS)).delay()
    head = f"group {handle.id} did not finish within {TIMEOUT} s: "

    took, said = ran_out(lambda: handle.get(timeout=TIMEOUT))  # no member done
    assert took < TIMEOUT + SLACK, (took, said)
    assert re.fullmatch(re.escape(head) + r"\{'queued': [\d,]+\}.*", said), said

    finish(admin, app, handle, range(MEMBERS - 1))  # all but the last
    took, said = ran_out(lambda: handle.get(timeout=TIMEOUT))
    assert took < TIMEOUT + SLACK, (took, said)
    assert re.fullmatch(re.escape(head) + r"\{'succeeded': [\d,]+(, 'queued': 1)?\}.*",
                        said), said

    finish(admin, app, handle, range(MEMBERS - 1, MEMBERS))
    assert handle.get(timeout=DEADLINE) == [value(index) for index in range(MEMBERS)]
    assert handle.status() == {"succeeded": MEMBERS}
