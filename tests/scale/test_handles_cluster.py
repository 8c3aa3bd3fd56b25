"""Handles rebuilt by id, forget() and registered types on a real three-primary Redis
Cluster: a workflow's handle record sits in its first task's slot, its steps on others."""
from __future__ import annotations

import decimal
import enum
import threading
from typing import Any, Callable, List

import pytest

from minitask import Minitask, ResultTimeout, chain, group
from tests.support.scale_kit import DEADLINE, ScaleKit
from tests.support.topologies import Cluster

from .test_cluster import spread_queues

pytestmark = pytest.mark.scale


class Tier(enum.Enum):
    GOLD = "gold"


def _add(a: Any, b: Any) -> Any:
    return a + b


def _tiered(value: Tier, amount: decimal.Decimal) -> List[Any]:
    return [value, amount * 2]


def _typed(app: Minitask) -> None:
    app.register_type(Tier, 40, lambda t: t.value.encode(), lambda b: Tier(b.decode()))
    app.task(name="add")(_add)
    app.task(name="tiered")(_tiered)


def test_rebuilt_handles_forget_and_types_work_across_shards(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.client(), cluster.url)
    queues = spread_queues(cluster, kit)
    app = kit.app
    _typed(app)
    other = Minitask(kit.app_name, broker=cluster.client())
    _typed(other)
    add = app.tasks["add"]
    try:
        last = chain(add.s(1, 1).set(queue=queues[0]), add.s(10).set(queue=queues[1]),
                     add.s(100).set(queue=queues[2])).delay()
        sent = group(add.s(1, 1).set(queue=queues[1]),
                     chain(add.s(2, 2).set(queue=queues[2]), add.s(3).set(queue=queues[0]))
                     ).delay()
        typed = app.tasks["tiered"].apply_async((Tier.GOLD, decimal.Decimal("1.25")),
                                                queue=queues[2])
        rebuilt = other.handle(last.id)
        with pytest.raises(ResultTimeout, match="did not finish"):
            rebuilt.get(timeout=0.2)  # waits: its step is not sent, no worker runs yet
        members = other.group_handle(sent.id)

        worker = app.worker(queues=queues)
        runner = threading.Thread(target=worker.run)
        runner.start()
        try:
            assert rebuilt.get(timeout=DEADLINE) == 112
            assert members.get(timeout=DEADLINE) == [2, 7]
            doubled = other.handle(typed.id).get(timeout=DEADLINE)
            assert doubled == [Tier.GOLD, decimal.Decimal("2.50")]
        finally:
            worker.stop()
            runner.join(timeout=DEADLINE)
        assert not runner.is_alive()
        assert rebuilt.ready() and rebuilt.successful() and not rebuilt.failed()
        assert rebuilt.forget() is True and rebuilt.status() == "unknown"
    finally:
        other.close()
