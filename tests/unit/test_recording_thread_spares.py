"""The asyncio pool's recording threads (at most four) and a step that waits for Redis
(``persist`` backing off: an outage, a write the ACL refuses for up to
``visibility_timeout``): with every thread in such a step, the other slots' steps
waited behind them and the pool stalled. A waiting step has a spare thread stand in
for it, up to one a slot; a spare ends once the step it stood in for has."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List

from minitask.errors import BrokerError
from minitask.worker.outages import persist
from minitask.worker.pools.recording import RecordingThreads

DEADLINE = 30.0


def _threads() -> List[threading.Thread]:
    return [thread for thread in threading.enumerate()
            if thread.name.startswith("minitask-record-")]


def test_a_step_waiting_for_redis_holds_no_other_step() -> None:
    loop = asyncio.new_event_loop()
    before = set(_threads())
    recording = RecordingThreads(loop, 1, 3)
    refused = threading.Event()  # set: the ACL allows the write again

    def waits() -> str:
        def step() -> str:
            if not refused.is_set():
                raise BrokerError("NOPERM refused", reason="permission")
            return "written"
        return str(persist(step, "record a refused outcome", refused_for=DEADLINE))

    async def main() -> Any:
        waiting = recording.run(waits)
        await asyncio.sleep(0.2)  # it backs off: a spare serves meanwhile
        other = await asyncio.wait_for(recording.run(lambda: "recorded"), DEADLINE)
        made = len([thread for thread in _threads() if thread not in before])
        refused.set()
        return other, made, await asyncio.wait_for(waiting, DEADLINE)

    try:
        other, made, waited = loop.run_until_complete(main())
        assert (other, made, waited) == ("recorded", 2, "written")  # its one, and a spare
        # the spare left over ends once the waiting step has
        until = time.monotonic() + DEADLINE
        while len([t for t in _threads() if t not in before and t.is_alive()]) > 1:
            assert time.monotonic() < until, _threads()
            time.sleep(0.02)
    finally:
        loop.run_until_complete(asyncio.sleep(0))
        recording.close()
        loop.close()
