"""A script call packed ahead of time is kept per (script, queue) with its static keys,
so a key that belongs to one task (its result, its once-marker) must travel in the
call's dynamic part: two tasks of one queue give the same static keys."""
from __future__ import annotations

from minitask import Minitask
from minitask.wire.message import new_message
from minitask.wire.serializer import encode_message


def test_the_state_and_cancel_calls_of_two_tasks_share_their_static_keys(
        app: Minitask) -> None:
    results = app.broker.results
    calls = []
    for task_id in ("first", "second"):
        body = encode_message(new_message(task_id, "t", [], {}, "default", 5, 0, None))
        calls.append((results.state_call("default", task_id),
                      results.cancel_call("default", task_id, body, 1000)))
    for one, other in zip(*calls):
        assert one[0] == other[0] and one[1] == other[1]
        assert one[2] == other[2], f"{one[0]}: a task's own key among the static keys"
        assert one[3] != other[3]
