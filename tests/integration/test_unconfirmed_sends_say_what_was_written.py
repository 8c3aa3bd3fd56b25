"""A producer's DurabilityError, replica stopped, says truly what was written and lets
the user do what docs/guide/durability.rst tells them (probe29i M-B, M-C):

* a workflow's ``delay()`` (chain, chord, group; one queue or two) was written whole:
  its error names the workflow's handle id (``task_id``), by which it is found, and
  says a resend would run it twice;
* ``delay_many()`` over several chunks sends every chunk, then raises one error that
  counts and carries every id written unconfirmed (plain and flow-limited tasks).

A real primary and replica; the replica stopped with SIGSTOP.
"""
from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

from minitask import DurabilityError, chain, chord, group
from minitask.admin.workflows import workflow
from minitask.broker.keys import queue_keys
from tests.support.replicas import NO_HANG, durable_app, frozen, pair_per_module  # noqa: F401
from tests.support.servers import RedisServer


def test_a_workflow_unconfirmed_names_its_handle_and_says_it_was_written(
        pair: List[RedisServer]) -> None:
    primary, replica = pair
    app = durable_app(primary, "wf-unconfirmed")
    add, add2 = app.tasks["add"], app.tasks["add2"]
    workflows: List[Any] = [
        ("chain", chain(add.s(1, 1), add.s(1).set(task_id="chain-1q"))),
        ("chain", chain(add.s(1, 1), add2.s(1), add.s(1).set(task_id="chain-2q"))),
        ("chord", chord([add.s(i) for i in range(3)], add.s().set(task_id="chord-1q"))),
        ("chord", chord([add.s(1), add2.s(2)], add.s().set(task_id="chord-2q"))),
    ]
    try:
        caught: List[DurabilityError] = []
        with frozen(replica, NO_HANG * 3):
            for kind, sent in workflows:
                with pytest.raises(DurabilityError) as error:
                    sent.delay()
                text = str(error.value)
                assert kind in text and "written" in text and "twice" in text, text
                assert "0 of 1 replica" in text and error.value.confirmed == 0, text
                caught.append(error.value)
            with pytest.raises(DurabilityError) as grouped:
                group([add.s(1), add2.s(2)]).delay()
        assert [e.task_id for e in caught] == ["chain-1q", "chain-2q", "chord-1q", "chord-2q"]
        for error in caught:  # found by the id the error names (minitask inspect workflow)
            found = workflow(app, error.task_id, say=False)
            assert found is not None and found["id"] == error.task_id, error.task_id
            assert f"minitask inspect workflow {error.task_id}" in str(error)
        assert grouped.value.task_id and "group" in str(grouped.value)
        members = app.group_handle(grouped.value.task_id).handles
        assert [h.status() for h in members] == ["queued", "queued"]
    finally:
        app.close()


@pytest.mark.parametrize("task", ["add", "lim"])
def test_delay_many_unconfirmed_sends_every_chunk_and_carries_every_id(
        pair: List[RedisServer], task: str) -> None:
    primary, replica = pair
    app = durable_app(primary, f"many-unconfirmed-{task}")
    calls = [(n,) for n in range(2500)]  # three chunks of at most 1,000
    try:
        with frozen(replica, NO_HANG * 3):
            with pytest.raises(DurabilityError) as caught:
                app.tasks[task].delay_many(calls)
        error = caught.value
        with primary.client() as client:
            written = client.hlen(queue_keys(app.name, "one").messages)
        assert written == 2500  # no chunk left unsent
        assert len(error.task_ids) == 2500 and len(set(error.task_ids)) == 2500
        assert error.task_id == error.task_ids[0]
        assert "(and the 2499 other task(s) sent with it" in str(error), str(error)
        assert {app.handle(i).status() for i in error.task_ids[::250]} == {"queued"}
    finally:
        app.close()


@pytest.mark.parametrize("task", ["add", "lim"])
def test_adelay_many_unconfirmed_sends_every_chunk_too(pair: List[RedisServer],
                                                       task: str) -> None:
    primary, replica = pair
    app = durable_app(primary, f"amany-unconfirmed-{task}")

    async def scenario() -> DurabilityError:
        try:
            with pytest.raises(DurabilityError) as caught:
                await app.tasks[task].adelay_many([(n,) for n in range(2100)])
            return caught.value
        finally:
            await app.aclose()
    try:
        with frozen(replica, NO_HANG * 3):
            error = asyncio.run(scenario())
        with primary.client() as client:
            assert client.hlen(queue_keys(app.name, "one").messages) == 2100
        assert len(set(error.task_ids)) == 2100 and "2099 other" in str(error)
    finally:
        app.close()
