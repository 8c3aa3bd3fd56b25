"""Plan records on the suite's own redis-server: a chain, a group and a chord sent
by the real send path get their plan (``workflow:<id>``) in the same script call as
their first messages, every step's marker names the workflow, nothing is written
when that call fails, the plan expires with the results, a 10,000-member group
makes a small one, and ``minitask inspect workflow`` lists it."""
from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Iterator, List

import pytest
import redis

from minitask import Minitask, chain, chord, group
from minitask.admin.workflows import workflow
from minitask.errors import BrokerError
from minitask.stores.plans import LIST_SHOWN, TASKS_SHOWN, tasks_of
from minitask.wire.serializer import unpack_data
from tests.support.draining import drain
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def shop(redis_server: RedisServer, admin: "redis.Redis[bytes]") -> Iterator[SimpleNamespace]:
    app = Minitask("shop", broker=redis_server.url, result_ttl=60)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task
    def total(values: List[int]) -> int:
        return sum(values)

    @app.task(retries=0)
    def boom(x: int) -> int:
        raise ValueError(f"boom {x}")

    @app.task(queue="emails", result_ttl=0.5)
    def brief(x: int) -> int:
        return x

    @app.task
    def noted(task_id: str) -> str:
        return f"noted {task_id}"

    try:
        yield SimpleNamespace(app=app, add=add, total=total, boom=boom, brief=brief,
                              noted=noted)
    finally:
        app.close()


def plan_key(app: Minitask, queue: str, workflow_id: str) -> str:
    return app.broker.workflows.keys(queue).workflow(workflow_id)


def marker_of(app: Minitask, queue: str, task_id: str, admin: "redis.Redis[bytes]") -> str:
    found = admin.hget(app.broker.workflows.keys(queue).once(task_id), "w")
    return found.decode() if found else ""


def test_a_chord_gets_its_plan_with_its_first_messages_and_every_step_names_it(
        shop: SimpleNamespace, admin: "redis.Redis[bytes]") -> None:
    app = shop.app
    handle = chord([shop.add.s(i, i) for i in range(3)] + [shop.boom.s(7)],
                   shop.total.s()).delay()
    key = plan_key(app, "default", handle.id)
    record = unpack_data(admin.get(key), "a plan")
    assert record["id"] == handle.id and record["root"][0] == "h"
    # written with the handle record, expiring with it (the longest result_ttl)
    assert 0 < admin.pttl(key) <= 60_000
    assert abs(admin.pttl(key) - admin.pttl(app.broker.workflows.keys("default")
                                            .handle(handle.id))) < 1000
    found = workflow(app, handle.id)
    assert found is not None and found["kind"] == "chord"
    header, body = found["root"]["header"], found["root"]["body"]
    assert [member["task"] for member in header] == [shop.add.name] * 3 + [shop.boom.name]
    assert body["id"] == handle.id and body["state"] == "pending"
    assert {member["state"] for member in header} == {"queued"}
    for member in header:  # sent by start(): each marker names the workflow
        assert marker_of(app, "default", member["id"], admin) == handle.id

    app.worker(["default"], burst=True).run()
    found = workflow(app, handle.id)
    assert found is not None
    states = [member["state"] for member in found["root"]["header"]]
    assert states == ["succeeded"] * 3 + ["dead"]
    assert found["root"]["body"]["state"] == "cancelled"
    assert found["counts"] == {"succeeded": 3, "dead": 1, "cancelled": 1}


def test_a_chain_s_later_steps_sent_by_the_worker_name_the_workflow(
        shop: SimpleNamespace, admin: "redis.Redis[bytes]") -> None:
    app = shop.app
    handle = chain(shop.add.s(1, 2), group(shop.add.s(1), shop.add.s(2)), shop.total.s(),
                   shop.brief.s()).delay()
    app.worker(["default", "emails"], burst=True).run()
    assert handle.get(timeout=10) == 9
    found = workflow(app, handle.id)
    assert found is not None and found["kind"] == "chain"
    steps = tasks_of(found["root"])
    assert [step["state"] for step in steps] == ["succeeded"] * 5
    for step in steps:
        assert marker_of(app, step["queue"], step["id"], admin) == handle.id
    assert app.broker.workflows.workflow_of("emails", handle.id) == handle.id
    # a plain task is no workflow's step, and a lone signature makes no plan
    plain = shop.add.delay(1, 1)
    alone = shop.add.s(2, 2).delay()
    assert app.broker.workflows.workflow_of("default", plain.id) == ""
    assert workflow(app, alone.id) is None


def test_error_callbacks_are_kept_where_declared_with_their_state(
        shop: SimpleNamespace, admin: "redis.Redis[bytes]") -> None:
    app = shop.app
    inner = group(shop.add.s(1), shop.boom.s()).on_error(shop.noted.s())
    handle = chain(shop.add.s(1, 2), inner, shop.total.s()).on_error(shop.add.si(5, 5)).delay()
    before = workflow(app, handle.id)
    assert before is not None and before["errbacks"] == 2
    outer, = before["root"]["on_error"]
    (step, group_node, last) = before["root"]["steps"]
    inner_errback, = group_node["on_error"]
    assert (outer["task"], inner_errback["task"]) == (shop.add.name, shop.noted.name)
    assert step["on_error"] == last["on_error"] == [] and outer["state"] == "pending"
    app.worker(burst=True).run()
    found = workflow(app, handle.id)
    assert found is not None
    noted, = found["root"]["steps"][1]["on_error"]
    assert noted["id"] == inner_errback["id"] and noted["state"] == "succeeded"
    assert app.handle(noted["id"]).get(timeout=10).startswith("noted ")
    assert found["root"]["on_error"][0]["state"] == "succeeded"
    assert marker_of(app, "default", noted["id"], admin) == handle.id
    # the steps' counts are of the steps only
    assert found["counts"] == {"succeeded": 2, "dead": 1, "cancelled": 1}


def test_a_step_whose_result_expired_reads_expired_or_unknown_not_pending(
        shop: SimpleNamespace) -> None:
    app = shop.app
    handle = chain(shop.brief.s(1), shop.add.s(2)).delay()
    lone = group(shop.brief.s(3), shop.add.s(1, 1)).delay()
    app.worker(["default", "emails"], burst=True).run()
    assert handle.get(timeout=10) == 3

    def states(workflow_id: str) -> List[str]:
        found = workflow(app, workflow_id)
        assert found is not None
        return [step["state"] for step in tasks_of(found["root"])]

    # brief's result lasts 0.5 s: then its step has no marker, yet the step after it
    # was sent, so it ran; in the group nothing says whether it ran, and the plan is
    # older than its result ttl. Both results expiring is waited for: the group's brief
    # ran after the chain's, and on a loaded machine it expired a moment later
    wait_until(lambda: states(handle.id)[0] != "succeeded"
               and states(lone.id)[0] != "succeeded", timeout=30,
               message="both of brief's results expiring")
    assert states(handle.id) == ["expired", "succeeded"]
    assert states(lone.id) == ["unknown", "succeeded"]
    # a step not sent yet, within its ttl, is still pending
    later = chain(shop.add.s(1, 1), shop.add.s(1)).delay()
    assert states(later.id) == ["queued", "pending"]


def test_nothing_is_written_when_the_call_with_the_plan_fails(
        shop: SimpleNamespace, admin: "redis.Redis[bytes]") -> None:
    app = shop.app
    k = app.broker.workflows.keys("default")
    admin.set(k.once("planted"), "not a marker")  # a marker of another type: refused
    sent = group(shop.add.s(1, 1), shop.add.s(2, 2).set(task_id="planted"),
                 shop.add.s(3, 3))
    with pytest.raises(BrokerError):
        sent.delay()
    assert admin.hlen(k.messages) == 0
    assert not admin.keys("*workflow:*") and not admin.keys("*handle:*")


def test_the_plan_expires_with_the_results(shop: SimpleNamespace,
                                           admin: "redis.Redis[bytes]") -> None:
    app = shop.app
    handle = group(shop.brief.s(1), shop.brief.s(2)).delay()
    key = plan_key(app, "emails", handle.id)
    assert 0 < admin.pttl(key) <= 500
    wait_until(lambda: not admin.exists(key), timeout=30, message="the plan's expiry")
    assert workflow(app, handle.id) is None


def test_a_group_of_ten_thousand_makes_a_small_plan(shop: SimpleNamespace,
                                                    admin: "redis.Redis[bytes]") -> None:
    app = shop.app
    handle = group(shop.add.s(i, 1) for i in range(10_000)).delay()
    size = admin.strlen(plan_key(app, "default", handle.id))
    print(f"plan record of a 10,000-member group: {size} bytes")
    assert size < 5000
    found = workflow(app, handle.id)
    assert found is not None
    assert len(found["root"]["members"]) == LIST_SHOWN
    assert found["root"]["more"] == 10_000 - LIST_SHOWN == found["left_out"]
    assert found["counts"] == {"queued": LIST_SHOWN}
    # nested lists are bounded over the whole plan too
    nested = group(group(shop.add.s(i, j) for j in range(40)) for i in range(40)).delay()
    found = workflow(app, nested.id)
    assert found is not None and found["tasks"] <= TASKS_SHOWN


def test_inspect_workflow_lists_the_steps(redis_server: RedisServer, admin: "redis.Redis[bytes]",
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import tests.apps.basic as basic
    from minitask.cli import main
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    basic.app.close()  # connect again, to this server
    try:
        handle = chord([basic.add.s(1, 2), basic.fail.s("<b>no</b>")],
                       basic.add.s(5)).on_error(basic.chatty.s()).delay()
        drain(basic.app.worker(burst=True))
        assert main(["inspect", "-A", "tests.apps.basic", "workflow", handle.id, "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert listed["kind"] == "chord" and listed["counts"] == {
            "succeeded": 1, "dead": 1, "cancelled": 1}
        errback, = listed["root"]["on_error"]
        assert errback["task"] == "tests.apps.basic.chatty" and errback["state"] == "succeeded"
        assert listed["errbacks"] == 1
        assert main(["inspect", "-A", "tests.apps.basic", "workflow", handle.id]) == 0
        out = capsys.readouterr().out
        assert f"workflow {handle.id}: a chord of 3 task(s)" in out
        assert "1 error callback(s)" in out
        assert "succeeded  tests.apps.basic.add" in out and "then" in out
        assert "  on error succeeded  tests.apps.basic.chatty" in out
        assert errback["id"] in out
        assert main(["inspect", "-A", "tests.apps.basic", "workflow", "nope"]) == 1
        assert "unknown" in capsys.readouterr().out
        # a sent step's marker names it, and so does a cancelled one's
        first = listed["root"]["header"][0]["id"]
        assert basic.app.broker.workflows.workflow_of("default", first) == handle.id
        assert basic.app.broker.workflows.workflow_of("default", handle.id) == handle.id
    finally:
        basic.app.close()


def test_inspect_workflow_names_an_unreadable_plan_s_key_with_exit_status_1(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import tests.apps.basic as basic
    from minitask.cli import main
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    basic.app.close()  # connect again, to this server
    try:
        key = basic.app.broker.workflows.keys("default").workflow("planted")
        admin.set(key, b"\x00" * 300_000)  # over the bound: refused before unpacking
        assert main(["inspect", "-A", "tests.apps.basic", "workflow", "planted"]) == 1
        assert key in capsys.readouterr().err
    finally:
        admin.delete(key)
        basic.app.close()
