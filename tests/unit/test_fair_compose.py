"""Fair queues composed with workflows and app.batch() (guide/fair-queues,
"Composition"): on fakeredis (the very scripts) and on the suite's redis-server.

A step of a ``group_by`` task, or one given ``.set(group=...)``, goes into its group
when it is sent, by the producer or by the worker that ended the step before it;
calls with flow options or a group join a batch and go with it, in one write.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import pytest

from minitask import ArgumentError, ConfigurationError, Minitask, chain, chord, group
from minitask.testing import drain
from tests.support.clock import ManualClock


def _groups(app: Minitask, queue: str = "default") -> Dict[str, Any]:
    return app.broker.flow.group_counts_many([queue]).get(queue, {})


def _spec_groups(app: Minitask, queue: str = "default") -> List[str]:
    """The group each spec of the queue names ('' for a spec of no group)."""
    specs = app.broker.flow.specs(queue).values()
    return sorted(spec.split("\n", 9)[9] if spec.count("\n") > 5 else "" for spec in specs)


@pytest.fixture
def tenants(make_app: Callable[..., Minitask]) -> Minitask:
    app = make_app("compose")
    ran: List[Any] = []
    app.ran = ran  # type: ignore[attr-defined]

    @app.task(name="job", group_by="tenant", group_max_running=1)
    def job(tenant: Any, n: int = 0) -> Any:
        ran.append((tenant, n))
        return tenant

    @app.task(name="plain")
    def plain(value: Any = None) -> Any:
        ran.append(("plain", value))
        return value

    @app.task(name="limited", max_running=2)
    def limited(value: Any = None) -> Any:
        ran.append(("limited", value))
        return value

    return app


def test_the_first_steps_of_a_workflow_go_into_their_groups(tenants: Minitask) -> None:
    job, plain = tenants.tasks["job"], tenants.tasks["plain"]
    sent = group(job.si("a", 1), job.si("b", 2), plain.si(3).set(group="c"),
                 plain.si(4)).delay()
    assert tenants.group_handle(sent.id).id == sent.id  # its record went with the steps
    assert _groups(tenants)["groups"] == 3
    assert _spec_groups(tenants) == ["a", "b", "c"]
    assert tenants.broker.queues.counts("default")["ready"] == 1  # plain.si(4), ungrouped
    drain(tenants)
    assert sorted(map(str, tenants.ran)) == sorted(  # type: ignore[attr-defined]
        map(str, [("a", 1), ("b", 2), ("plain", 3), ("plain", 4)]))
    assert tenants.broker.flow.specs("default") == {} and _groups(tenants) == {}


def test_later_steps_take_their_groups_as_the_worker_sends_them(tenants: Minitask) -> None:
    job, plain = tenants.tasks["job"], tenants.tasks["plain"]
    handle = chain(plain.si("x"), job.si("a", 1), job.s(2), plain.si(5).set(group="z")).delay()
    assert _spec_groups(tenants) == []  # the first step is ungrouped
    worker = tenants.worker(burst=True)
    sent = []
    for _ in range(3):
        assert worker.run_once()
        sent.append(_spec_groups(tenants))
    # job.si("a", 1) in a; job.s(2) takes its group from the result of the step
    # before it (its tenant argument), "a"; then plain's own group z
    assert sent == [["a"], ["a"], ["z"]]
    drain(tenants)
    assert handle.get(timeout=1) == 5
    assert tenants.ran[1:3] == [("a", 1), ("a", 2)]  # type: ignore[attr-defined]


def test_chord_members_and_body_sent_by_a_worker_are_grouped(tenants: Minitask) -> None:
    job, plain = tenants.tasks["job"], tenants.tasks["plain"]
    handle = chain(plain.si(0), chord([job.si(t, 1) for t in "abc"],
                                      plain.s().set(group="body"))).delay()
    worker = tenants.worker(burst=True)
    assert worker.run_once()
    assert _groups(tenants)["groups"] == 3 and _spec_groups(tenants) == ["a", "b", "c"]
    for _ in range(3):
        assert worker.run_once()
    assert _spec_groups(tenants) == ["body"] and _groups(tenants)["groups"] == 1
    drain(tenants)
    assert handle.get(timeout=1) == ["a", "b", "c"]


def test_a_delayed_step_joins_its_group_when_it_falls_due(tenants: Minitask,
                                                          clock: ManualClock) -> None:
    job, plain = tenants.tasks["job"], tenants.tasks["plain"]
    handle = chain(plain.si(0), job.si("a", 1).set(delay=5)).delay()
    worker = tenants.worker(burst=True)
    assert worker.run_once()
    assert _spec_groups(tenants) == ["a"] and _groups(tenants) == {}  # scheduled
    assert tenants.broker.queues.counts("default")["scheduled"] == 1
    clock.advance(6)
    assert worker.run_once()  # promoted, joined its group, served in its turn
    assert handle.get(timeout=1) == "a" and _groups(tenants) == {}
    assert tenants.broker.flow.specs("default") == {}


def test_a_result_that_is_no_group_ends_the_step_before_it_dead(tenants: Minitask) -> None:
    job, plain = tenants.tasks["job"], tenants.tasks["plain"]
    first = plain.si(1.5)
    handle = chain(first, job.s(2)).delay()
    drain(tenants)
    with pytest.raises(Exception, match="the result of the step before it"):
        handle.get(timeout=1)
    dead = tenants.dead_letters("default")
    assert [letter.name for letter in dead] == ["plain"]
    assert "group" in dead[0].message and "task 'job'" in dead[0].message


def test_steps_of_a_limited_task_carry_its_limits(tenants: Minitask) -> None:
    limited = tenants.tasks["limited"]
    group(limited.si(n) for n in range(5)).delay()
    specs = list(tenants.broker.flow.specs("default").values())
    assert len(specs) == 5 and all(spec.startswith("7:limited\n") for spec in specs)
    result = tenants.broker.queues.fetch("default", now_ms=tenants.clock.now_ms(),
                                         lease_ms=30_000, count=5, max_deliveries=5)
    assert len(result.deliveries) == 2  # max_running=2: the others are parked


def test_bad_step_groups_are_refused_before_anything_is_sent(tenants: Minitask) -> None:
    job, plain = tenants.tasks["job"], tenants.tasks["plain"]
    with pytest.raises(ConfigurationError, match="task 'plain': group "):
        plain.si(1).set(group="a\nb")
    with pytest.raises(ConfigurationError, match="task 'plain': group must be"):
        plain.si(1).set(group=1.5)
    with pytest.raises(ArgumentError, match="task 'job': argument 'tenant' \\(group_by\\)"):
        chain(plain.si(1), job.si(None, 2)).delay()
    assert tenants.broker.transport.client.keys("*") == []


def test_grouped_and_flow_calls_join_a_batch_and_go_with_it(
        tenants: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    job, plain, limited = tenants.tasks["job"], tenants.tasks["plain"], tenants.tasks["limited"]
    tenants.broker.queues.register_queues(["default"])  # what a first send does
    transport = tenants.broker.transport
    writes: List[int] = []
    real = transport.run_calls

    def counted(calls: Any, what: str, *rest: Any, **options: Any) -> Any:
        if any(call[0] != "groups_top" for call in calls):  # (_groups' read: no write)
            writes.append(len(calls))
        return real(calls, what, *rest, **options)

    monkeypatch.setattr(transport, "run_calls", counted)
    with tenants.batch():
        handles = job.delay_many([("big", n) for n in range(3)])
        handles.append(job.apply_async(("small",), group="other"))
        handles.append(limited.delay(1))
        handles.append(plain.apply_async((2,), expires=60))
        handles.append(plain.delay(3))
        assert writes == [] and _groups(tenants) == {}
    assert writes == [1]  # one write: one script call for the queue
    assert _groups(tenants)["groups"] == 2 and _groups(tenants)["grouped"] == 4
    assert [h.status() for h in handles] == ["queued"] * 7
    drain(tenants)
    assert [h.get(timeout=1) for h in handles] == ["big"] * 3 + ["small", 1, 2, 3]


def test_a_batch_that_ends_with_an_exception_sends_no_grouped_call(tenants: Minitask) -> None:
    job = tenants.tasks["job"]
    with pytest.raises(KeyError):
        with tenants.batch():
            job.delay("a")
            raise KeyError("no")
    assert tenants.broker.transport.client.keys("*") == []
