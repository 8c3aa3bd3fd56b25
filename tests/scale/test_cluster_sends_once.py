"""On a real Redis Cluster (three primaries, reached through proxies that drop a reply),
a script call that sends a task is written once: its reply lost, the send says it
may have been made (``sent``, its id listed), never "could not", and no retry layer
runs it again. Before: redis-py's cluster client sent the call again after the lost
reply (the script ran twice, nothing said); a confirmed call (durability) said
"could not", ``sent`` False; the async producer did both.
"""
from __future__ import annotations

import uuid
from typing import Any, Optional

import pytest

from minitask import Minitask
from minitask.errors import BrokerError
from tests.support.cluster_cuts import CutCluster, cut_cluster  # noqa: F401 (a fixture)
from tests.support.cutting import run_closing, said_lost

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]


def _app(cut: CutCluster, durability: Optional[str] = None, aio: bool = False) -> Minitask:
    options: Any = {} if durability is None else {"durability": durability,
                                                  "durability_timeout": 0.2}
    if aio:
        options["async_broker"] = cut.async_client()
    return Minitask(f"once-{uuid.uuid4().hex[:8]}", broker=cut.client(), **options)


@pytest.mark.parametrize("durability", [None, "replicated"])
def test_a_send_whose_reply_is_lost_is_told_sent_and_runs_once(
        cut_cluster: CutCluster, durability: Optional[str]) -> None:  # noqa: F811
    app = _app(cut_cluster, durability)
    task = app.task(name="add")(lambda a: a)
    try:
        try:
            task.delay(0)  # connected, scripts loaded (no replica: not confirmed)
        except BrokerError:
            assert durability is not None
        task_id = f"cut-{uuid.uuid4().hex}"
        before = cut_cluster.evalsha_calls()
        cut_cluster.cut_reply_to(task_id.encode())
        with pytest.raises(BrokerError) as lost:
            task.apply_async((1,), task_id=task_id)
        assert cut_cluster.cuts() == 1
        said_lost(lost.value, task_id)
        assert cut_cluster.evalsha_calls() - before == 1, "the script ran more than once"
        assert app.handle(task_id).status() == "queued"
    finally:
        app.close()


@pytest.mark.parametrize("durability", [None, "replicated"])
def test_an_async_send_whose_reply_is_lost_is_told_sent_and_runs_once(
        cut_cluster: CutCluster, durability: Optional[str]) -> None:  # noqa: F811
    app = _app(cut_cluster, durability, aio=True)
    task = app.task(name="add")(lambda a: a)

    async def checks() -> None:
        try:
            await task.adelay(0)  # connected, scripts loaded
        except BrokerError:
            assert durability is not None
        task_id = f"cut-{uuid.uuid4().hex}"
        before = cut_cluster.evalsha_calls()
        cut_cluster.cut_reply_to(task_id.encode())
        with pytest.raises(BrokerError) as lost:
            await task.aapply_async((1,), task_id=task_id)
        assert cut_cluster.cuts() == 1
        said_lost(lost.value, task_id)
        assert cut_cluster.evalsha_calls() - before == 1, "the script ran more than once"
        assert await app.handle(task_id).astatus() == "queued"

    run_closing(app, checks)
