"""A batch's write cut after a call refused part way through its script keeps that it
was (``part_way``): its text then says that a resend by ``task_id=`` waits for the ACL
to allow the command refused, and queues a task the refusal left unfinished once
(review 29m, item 2: the Redis Cluster branch of ``QueueStore.enqueue_queues`` made a
new error without it; issue 29: a refused send leaves such a task not pending)."""
from __future__ import annotations

from minitask.errors import BrokerError
from minitask.stores.partial_batches import cut_write

_PARTS = [("a", [("id-1", b"m", 0, 0)]), ("b", [("id-2", b"m", 0, 0)])]


def test_a_cut_write_keeps_part_way() -> None:
    refused = BrokerError("refused part way", reason="permission", sent=True)
    refused.part_way = True
    assert cut_write(refused, _PARTS, 1).part_way
    lost = BrokerError("lost the reply", reason="unreachable", sent=True)
    assert not cut_write(lost, _PARTS, 1).part_way
