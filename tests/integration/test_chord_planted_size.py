"""A chord's group state whose size someone overwrote with another whole number (3 or
100,000,000 for a group of 2, or 1): before, a larger size kept the chord waiting for
ever, not a word logged, nothing dead-lettered, and a smaller one ran the body with the
results cut short ([1]), silently. Each member's frame carries the size of the group it
was sent into (``"n"``), and group_join.lua refuses state of another size as state
minitask did not write: the member is dead-lettered naming the key, the body ends
cancelled saying why, nothing is written to the group, and the worker goes on.

A real worker process on the suite's redis-server, started once the size is planted."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List

import pytest

from minitask import TaskFailed, chord
from tests.apps.planted_size import build
from tests.support.processes import Processes
from tests.support.waiting import wait_until

#: How long a worker on a loaded machine may take to start and run a few tasks.
DEADLINE = 60.0
#: The statuses a member ends in (succeeded before the fix, failed: dead-lettered, after).
ENDED = ("succeeded", "failed", "cancelled")


def group_key(admin: Any) -> bytes:
    [key] = [key for key in admin.keys("minitask:*:group:*") if not key.endswith(b":results")]
    return key  # type: ignore[no-any-return]


@pytest.mark.integration
@pytest.mark.parametrize("planted", ["3", "100000000", "1"])
def test_a_chord_whose_group_size_was_overwritten_ends_naming_the_key(
        planted: str, redis_server: Any, admin: Any, processes: Processes,
        tmp_path: Path) -> None:
    app = build(redis_server.url)
    try:
        member = app.tasks["sized.member"]
        members = [member.s(i + 1).set(task_id=f"m{i}") for i in range(2)]
        handle = chord(members, app.tasks["sized.received"].s("planted")).delay()
        key = group_key(admin)
        admin.hset(key, "size", planted)
        log = tmp_path / "worker.log"
        processes.worker("tests.apps.planted_size", "--pool", "thread", "-c", "2",
                         env={"MINITASK_BROKER_URL": redis_server.url}, log=log)
        wait_until(lambda: all(app.handle(f"m{i}").status() in ENDED for i in range(2)),
                   timeout=DEADLINE, message="both members ended")
        # the body never ran with a list cut short, nor waits for ever: it ended
        # cancelled (before the members' outcomes were recorded), naming the key
        assert admin.lrange("marks:received:planted", 0, -1) == []
        assert handle.status() == "cancelled"
        with pytest.raises(TaskFailed, match=f"{key.decode()}.*size is {planted}"):
            handle.get(timeout=0)
        letters: List[str] = [letter.message for letter in app.dead_letters()]
        assert letters and all(key.decode() in message for message in letters)
        assert {app.handle(f"m{i}").status() for i in range(2)} == {"failed"}
        # nothing was written to the group: its planted size and no result
        assert admin.hget(key, "size") == planted.encode()
        assert admin.hlen(key + b":results") == 0
        assert key.decode() in log.read_text(errors="replace")
        # the worker goes on running other tasks
        assert app.tasks["sized.echo"].delay("after").get(timeout=DEADLINE) == "after"
    finally:
        app.close()
