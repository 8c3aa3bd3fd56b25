"""A lost reply names every task the caller must know of (review 29b): a delay_many()
of several chunks whose later chunk loses its reply says which of its tasks were
enqueued, which may have been, which were never sent (M1); a workflow whose start
loses its reply names its handle and its steps, and keeps its explicit step ids taken
(M2). On a real redis-server, the reply cut by a proxy."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Iterator, List

import pytest
import redis

from minitask import Minitask, chain, group
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError, ConfigurationError
from tests.support.cutting import CuttingProxy
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[CuttingProxy]:
    cutting = CuttingProxy(redis_server)
    yield cutting
    cutting.close()


def _held(admin: "redis.Redis[bytes]", app: str, ids: List[str]) -> int:
    """How many of ``ids`` Redis holds, once the cut write has run (bounded wait)."""
    messages, deadline = QueueKeys(app, "default").messages, time.monotonic() + 10
    while True:
        held = sum(1 for task_id in ids if admin.hexists(messages, task_id))
        if held == len(ids) or time.monotonic() > deadline:
            return held
        time.sleep(0.05)


@pytest.mark.parametrize("form", ["delay_many", "adelay_many"])
def test_a_later_chunk_whose_reply_is_lost_splits_the_call_three_ways(
        admin: "redis.Redis[bytes]", proxy: CuttingProxy, form: str) -> None:
    app = Minitask("chunklost", broker=proxy.url)
    rec = app.task(name="rec")(lambda tag: tag)
    calls = [(f"zzm{i}x",) for i in range(2500)]
    try:
        rec.delay_many([("warm",)] * 3)
        proxy.cut_reply_to(b"zzm1500x")  # in the second chunk (1,000 a chunk)
        with pytest.raises(BrokerError) as lost:
            if form == "delay_many":
                rec.delay_many(calls)
            else:
                asyncio.run(rec.adelay_many(calls))
        error = lost.value
        assert proxy.cuts == 1 and error.sent, str(error)
        assert len(error.enqueued_ids) == 1000  # the first chunk: Redis answered
        assert error.task_ids[:1000] == error.enqueued_ids
        assert len(error.task_ids) == 2000  # and the chunk whose reply was lost
        assert len(error.unsent_ids) == 500  # the third: never sent
        every = error.task_ids + error.unsent_ids
        assert len(set(every)) == 2500
        assert _held(admin, "chunklost", error.task_ids) == 2000
        assert _held(admin, "chunklost", error.unsent_ids) == 0
        assert admin.hlen(QueueKeys("chunklost", "default").messages) == 3 + 2000
        text = str(error)
        assert "the 1000 task(s) of the same call ahead of it were enqueued" in text, text
        assert "the 500 after it" in text and "never sent" in text, text
        assert f"app.handle({error.task_ids[1000]!r}).status()" in text, text
    finally:
        app.close()


def test_a_chunk_refused_after_others_names_those_not_sent(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    app = Minitask("chunkrefused", broker=redis_server.url)
    rec = app.task(name="rec")(lambda tag: tag)
    try:
        rec.delay("warm")
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", admin.info("memory")["used_memory"] + 3_000_000)
        with pytest.raises(BrokerError) as refused:  # 5 MB: the first 2 MB chunk fits
            rec.delay_many([("p" * 2000,) for _ in range(2500)])
        admin.config_set("maxmemory", 0)
        error = refused.value
        assert error.enqueued_ids == error.task_ids and len(error.task_ids) == 1000
        assert len(error.unsent_ids) == 1500
        assert _held(admin, "chunkrefused", error.unsent_ids) == 0
        assert "unsent_ids" in str(error)
    finally:
        admin.config_set("maxmemory", 0)
        app.close()


def test_a_workflow_whose_reply_is_lost_names_its_handle_and_steps(
        admin: "redis.Redis[bytes]", proxy: CuttingProxy) -> None:
    app = Minitask("flowlost", broker=proxy.url)
    rec = app.task(name="rec")(lambda tag: tag)

    def flow(tag: str) -> Any:
        return chain(rec.si(f"{tag}1"), rec.si(f"{tag}2").set(task_id=f"{tag}-last"))

    try:
        flow("warm").delay()
        proxy.cut_reply_to(b"zzchain1")
        with pytest.raises(BrokerError) as lost:
            flow("zzchain").delay()
        error = lost.value
        assert proxy.cuts == 1 and error.sent, str(error)
        assert error.task_id == "zzchain-last"  # the chain's handle: its last step's id
        assert len(error.task_ids) == 2 and error.task_ids[1] == "zzchain-last"
        assert _held(admin, "flowlost", error.task_ids[:1]) == 1  # the first step, queued
        assert app.handle(error.task_ids[0]).status() == "queued"
        text = str(error)
        assert "may have been written" in text and "minitask inspect workflow" in text, text
        # a group's explicit step id stays its own: another workflow is refused it
        proxy.cut_reply_to(b"zzgroup1")
        with pytest.raises(BrokerError) as cut:
            group([rec.si("zzgroup1").set(task_id="g-step"), rec.si("zzgroup2")]).delay()
        assert cut.value.sent and "g-step" in cut.value.task_ids, str(cut.value)
        assert "app.group_handle(" in str(cut.value)
        with pytest.raises(ConfigurationError, match="g-step"):
            group([rec.si("other").set(task_id="g-step")]).delay()
    finally:
        app.close()
