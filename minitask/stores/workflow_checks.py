"""What a workflow's script calls would refuse, looked at before any of them runs.

A workflow is sent by one script call per queue it touches (and per ``SPAWN_CHUNK``
steps): each is atomic, but not all of them together (on Redis Cluster each queue is
its own slot). A call refused for data minitask did not write (a queue key, or a
step's marker, of another type) left the others' steps queued, and run: a caller
who retried ran them twice. So such a workflow first runs ``spawn_check.lua`` once
per queue, in one round trip, which refuses, naming the key, with nothing written.
Someone planting a key between the check and the sending is not covered.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from ..broker.packing import ScriptCall
from ..broker.transport import Transport
from ..broker.keys import QueueKeys
from ..printable import own_logger

logger = own_logger(__name__)

#: A step as stores.workflows gathers it: (id, body, priority, due ms, ttl, flow spec).
Step = Tuple[str, bytes, int, int, int, Any]


def check_calls(keys: Any, steps: Dict[str, List[Step]], now_ms: int) -> List[ScriptCall]:
    """One ``spawn_check`` call per queue of ``steps`` (``keys``: a queue's keys)."""
    calls: List[ScriptCall] = []
    for queue, queued in steps.items():
        k: QueueKeys = keys(queue)
        later = any(step[3] > now_ms for step in queued)
        flowing = any(step[5] is not None for step in queued)
        priorities = sorted({step[2] for step in queued if step[3] <= now_ms})
        calls.append(("spawn_check", queue,
                      (k.messages, k.delayed, k.wake, *k.ready, k.flow),
                      [*(k.once(step[0]) for step in queued), "1" if later else "0",
                       "1" if flowing else "0", *priorities], len(queued)))
    return calls


def check_sends(transport: Transport, keys: Any, steps: Dict[str, List[Step]],
                now_ms: int, calls: Sequence[ScriptCall]) -> None:
    """Refuse a workflow whose ``calls`` one would refuse, before any runs, when it
    sends its steps in more than one call (not atomic together). A workflow sent by
    one spawn call is not checked: its cost stays as it was (spawn.lua refuses a
    foreign marker before its writes; a refused chord's group record is left, unfilled).

    Raises:
        BrokerError: naming the key of another type; nothing was written.
    """
    if sum(call[0] != "group_create" for call in calls) < 2:
        return
    transport.run_calls(check_calls(keys, steps, now_ms),
                        f"check the queues of {sum(map(len, steps.values()))} workflow "
                        f"step(s) before sending them")


__all__: List[Any] = ["check_sends"]
