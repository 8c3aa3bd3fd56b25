"""Workflows (guide/workflows) driven in-process, on fakeredis and on the real server.

Workers run one task at a time in this thread (``drain``); time moves with the
manual clock. Crashes are simulated where they hurt: a worker that dies after a
workflow step but before its ack is a worker whose ack never happens (its lease
then expires and another worker gets the task).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import msgpack
import pytest
import redis

from minitask import (ArgumentError, ConfigurationError, EncodeError, GroupHandle,
                      MessageTooLarge, Minitask, ResultTimeout, Retry, Signature, TaskFailed,
                      chain, chord, group)
from minitask.wire.serializer import decode_message, encode_message
from minitask.stores.results import ResultStore
from tests.support.clock import ManualClock
from tests.support.draining import drain


class Tasks:
    """An app with a few tasks whose runs are recorded in Redis (``runs:<name>``)."""

    def __init__(self, app: Minitask, client: "redis.Redis[bytes]") -> None:
        self.app = app
        self.client = client
        failures: Dict[str, int] = {}

        def note(name: str, *parts: Any) -> None:
            client.rpush(f"runs:{name}", repr(parts))

        @app.task
        def add(x: int, y: int) -> int:
            note("add", x, y)
            return x + y

        @app.task(queue="other")
        def mul(x: int, y: int) -> int:
            note("mul", x, y)
            return x * y

        @app.task
        def total(values: List[int]) -> int:
            note("total", values)
            return sum(values)

        @app.task
        def collect(values: List[Any], tag: str = "") -> List[Any]:
            note("collect", tag, values)
            return values

        @app.task
        def boom(x: Any) -> None:
            raise ValueError(f"boom {x}")

        @app.task(retries=3, retry_backoff=0.0)
        def once_retried(key: str, value: int) -> int:
            failures[key] = failures.get(key, 0) + 1
            if failures[key] == 1:
                raise Retry(delay=0)
            return value

        @app.task
        def report(failed_id: str, tag: str) -> None:
            client.rpush(f"errors:{tag}", failed_id)

        @app.task
        def big(size: int) -> str:
            return "x" * size

        self.add, self.mul, self.total, self.collect = add, mul, total, collect
        self.boom, self.once_retried, self.report, self.big = boom, once_retried, report, big

    def runs(self, name: str) -> List[str]:
        return [raw.decode() for raw in self.client.lrange(f"runs:{name}", 0, -1)]

    def errors(self, tag: str) -> List[str]:
        return [raw.decode() for raw in self.client.lrange(f"errors:{tag}", 0, -1)]

    def worker(self) -> Any:
        return self.app.worker(queues=["default", "other"])


@pytest.fixture
def tasks(make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> Tasks:
    return Tasks(make_app(visibility_timeout=5.0), redis_client)


def run_all(tasks: Tasks, clock: ManualClock, rounds: int = 20) -> int:
    """Drain, moving the clock on so that retries and expired leases come due."""
    ran = 0
    for _ in range(rounds):
        done = drain(tasks.worker())
        ran += done
        if not done:
            clock.advance(10)
            if not drain(tasks.worker()):
                return ran
    return ran


# -- signatures ------------------------------------------------------------------------

def test_signature_delay_prepends_its_arguments_and_runs_like_the_task(tasks: Tasks) -> None:
    handle = tasks.add.s(2).delay(40)
    drain(tasks.worker())
    assert handle.get(timeout=1) == 42
    assert tasks.runs("add") == ["(40, 2)"]


def test_signature_set_changes_queue_and_priority_and_refuses_unknown_options(
        tasks: Tasks) -> None:
    sig = tasks.add.s(1, 2).set(queue="other", priority=9)
    assert sig.set(task_id="fixed") is sig
    handle = sig.delay()
    assert handle.id == "fixed"
    assert tasks.app.broker.queues.counts("other")["ready_by_priority"] == {"9": 1}
    with pytest.raises(ConfigurationError, match="unknown option.*colour"):
        tasks.add.s(1, 2).set(colour="red")
    with pytest.raises(ConfigurationError, match="priority"):
        tasks.add.s(1, 2).set(priority=10)


def test_signature_apply_async_takes_per_call_options(tasks: Tasks, clock: ManualClock) -> None:
    handle = tasks.add.s(1).apply_async((2,), delay=30.0)
    assert handle.status() == "scheduled"
    clock.advance(31)
    drain(tasks.worker())
    assert handle.get(timeout=1) == 3


# -- chains ------------------------------------------------------------------------------

def test_chain_passes_each_result_on_across_queues_and_returns_the_last(tasks: Tasks) -> None:
    handle = (tasks.add.s(1, 1) | tasks.mul.s(10) | tasks.add.s(5)).delay()
    assert drain(tasks.worker()) == 3
    assert handle.get(timeout=1) == 25
    assert tasks.runs("add") == ["(1, 1)", "(20, 5)"]
    assert tasks.runs("mul") == ["(2, 10)"]


def test_immutable_step_receives_no_result(tasks: Tasks) -> None:
    handle = chain(tasks.add.s(1, 1), tasks.add.si(7, 8)).delay()
    drain(tasks.worker())
    assert handle.get(timeout=1) == 15


def test_chain_step_with_a_delay_waits_after_the_step_before(tasks: Tasks,
                                                             clock: ManualClock) -> None:
    handle = chain(tasks.add.s(1, 1), tasks.add.s(1).set(delay=60)).delay()
    assert drain(tasks.worker()) == 1
    assert handle.status() == "scheduled"
    clock.advance(61)
    assert drain(tasks.worker()) == 1
    assert handle.get(timeout=1) == 3


def test_dead_step_stops_the_chain_later_steps_are_cancelled_and_on_error_runs_once(
        tasks: Tasks) -> None:
    later = tasks.add.s(1)
    workflow = chain(tasks.add.s(1, 2), tasks.boom.s(), later, tasks.mul.s(2))
    handle = workflow.on_error(tasks.report.s("chain")).delay()
    drain(tasks.worker())
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=1)
    dead = tasks.app.dead_letters()
    assert [letter.name for letter in dead] == [tasks.boom.name]
    assert failed.value.task_id == dead[0].task_id
    assert failed.value.exc_type == "ValueError" and "boom 3" in failed.value.message
    assert handle.status() == "cancelled"
    assert tasks.runs("add") == ["(1, 2)"] and tasks.runs("mul") == []
    assert tasks.errors("chain") == [dead[0].task_id]


# -- groups --------------------------------------------------------------------------------

def test_group_of_a_thousand_is_sent_in_a_few_round_trips_and_returns_results_in_order(
        tasks: Tasks, monkeypatch: pytest.MonkeyPatch) -> None:
    transport = tasks.app.broker.transport
    trips: List[int] = []
    real = transport.run_calls

    def counted(calls: Any, what: str) -> Any:
        trips.append(len(calls))
        return real(calls, what)

    monkeypatch.setattr(transport, "run_calls", counted)
    handle = group(tasks.add.s(i, i) for i in range(1000)).delay()
    assert len(trips) == 1, trips  # one write, one script call per 1000 messages
    monkeypatch.undo()
    assert isinstance(handle, GroupHandle) and len(handle.handles) == 1000
    assert handle.status() == {"queued": 1000}
    drain(tasks.worker())
    assert handle.get(timeout=5) == [2 * i for i in range(1000)]
    assert handle.status() == {"succeeded": 1000}


def test_group_get_raises_the_first_failed_member_and_never_hangs(tasks: Tasks) -> None:
    handle = group(tasks.add.s(1, 1), tasks.boom.s(5), tasks.boom.s(6)).delay()
    drain(tasks.worker())
    with pytest.raises(TaskFailed, match="boom 5"):
        handle.get(timeout=2)
    assert handle.status() == {"succeeded": 1, "failed": 2}


def test_group_of_chains_returns_each_chains_last_result(tasks: Tasks) -> None:
    handle = group(chain(tasks.add.s(i, 1), tasks.mul.s(2)) for i in range(3)).delay()
    assert handle.status() == {"queued": 3}  # each chain counts as its first step
    drain(tasks.worker())
    assert handle.get(timeout=1) == [2, 4, 6]


def test_chain_ending_in_a_group_returns_its_group_handle(tasks: Tasks) -> None:
    handle = chain(tasks.add.s(1, 1), group(tasks.mul.s(2), tasks.add.s(3))).delay()
    empty = chain(tasks.add.s(1, 1), group()).delay()
    drain(tasks.worker())
    assert isinstance(handle, GroupHandle) and handle.get(timeout=1) == [4, 5]
    assert isinstance(empty, GroupHandle) and empty.get(timeout=1) == []


# -- chords --------------------------------------------------------------------------------

def test_chord_body_runs_once_with_results_in_header_order_across_queues(tasks: Tasks) -> None:
    header = [tasks.mul.s(i, 10) if i % 2 else tasks.add.s(i, 100) for i in range(10)]
    handle = chord(header, tasks.collect.s(tag="t")).delay()
    drain(tasks.worker())
    expected = [i * 10 if i % 2 else i + 100 for i in range(10)]
    assert handle.get(timeout=1) == expected
    assert tasks.runs("collect") == [repr(("t", expected))]


def test_chord_members_retried_once_count_once(tasks: Tasks, clock: ManualClock) -> None:
    header = group(tasks.once_retried.s(f"k{i}", i) for i in range(20))
    handle = chord(header, tasks.total.s()).delay()
    run_all(tasks, clock)
    assert handle.get(timeout=1) == sum(range(20))
    assert len(tasks.runs("total")) == 1


def test_chord_with_empty_header_runs_its_body_with_an_empty_list(tasks: Tasks) -> None:
    handle = chord(group(), tasks.total.s()).delay()
    drain(tasks.worker())
    assert handle.get(timeout=1) == 0


def test_dead_member_fails_the_chord_body_never_runs_on_error_once(tasks: Tasks) -> None:
    header = [tasks.add.s(1, 1), tasks.boom.s(3), tasks.boom.s(4), tasks.add.s(2, 2)]
    handle = chord(header, tasks.total.s()).on_error(tasks.report.s("chord")).delay()
    drain(tasks.worker())
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=1)
    dead = {letter.task_id: letter for letter in tasks.app.dead_letters()}
    assert failed.value.task_id in dead and "boom" in failed.value.message
    assert tasks.runs("total") == []
    assert tasks.errors("chord") == [failed.value.task_id]  # two died, one callback


def test_chain_ending_in_a_chord_and_a_chord_inside_a_chain(tasks: Tasks) -> None:
    ending = chain(tasks.add.s(1, 1), chord([tasks.mul.s(2), tasks.mul.s(3)],
                                            tasks.total.s())).delay()
    inside = chain(tasks.add.s(1, 1), group(tasks.mul.s(2), tasks.add.s(3)),
                   tasks.total.s(), tasks.mul.s(10)).delay()
    drain(tasks.worker())
    assert ending.get(timeout=1) == 2 * 2 + 2 * 3
    assert inside.get(timeout=1) == (4 + 5) * 10


def test_chord_of_chords(tasks: Tasks) -> None:
    inner = [chord([tasks.add.s(i, j) for j in range(3)], tasks.total.s()) for i in range(3)]
    handle = chord(inner, tasks.collect.s()).delay()
    drain(tasks.worker())
    assert handle.get(timeout=1) == [3 * i + 3 for i in range(3)]


def test_dead_member_of_an_inner_group_fails_the_outer_chord(tasks: Tasks) -> None:
    inner = chord([tasks.add.s(1, 1), tasks.boom.s(9)], tasks.total.s())
    handle = chord([inner, tasks.add.s(2, 2)], tasks.collect.s()).on_error(
        tasks.report.s("outer")).delay()
    drain(tasks.worker())
    with pytest.raises(TaskFailed, match="boom 9"):
        handle.get(timeout=1)
    assert tasks.runs("total") == [] and tasks.runs("collect") == []
    assert len(tasks.errors("outer")) == 1


# -- crashes and duplicates ------------------------------------------------------------------

class Died(BaseException):
    """A worker process dying: nothing after it runs in that worker."""


def test_member_whose_worker_dies_before_its_ack_is_redone_and_the_body_runs_once(
        tasks: Tasks, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every member's worker dies after its workflow step, before its ack: every
    member runs twice, the header completes twice, the body is sent once."""
    handle = chord([tasks.add.s(i, 0) for i in range(5)], tasks.total.s()).delay()
    real = ResultStore.ack_many
    dying = {"on": True}

    def ack_then_die(self: ResultStore, acks: Any) -> Any:
        if dying["on"] and any(ack[1] != handle.id for ack in acks):
            raise Died()
        return real(self, acks)

    monkeypatch.setattr(ResultStore, "ack_many", ack_then_die)
    for _ in range(5):
        with pytest.raises(Died):
            tasks.worker().run_once()
    dying["on"] = False
    clock.advance(6)  # the leases expire: the members are delivered again
    drain(tasks.worker())
    assert handle.get(timeout=1) == sum(range(5))
    assert len(tasks.runs("add")) == 10
    assert tasks.runs("total") == ["([0, 1, 2, 3, 4],)"]


def test_step_run_again_after_its_successor_finished_does_not_send_it_again(
        tasks: Tasks, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    handle = chain(tasks.add.s(1, 1), tasks.mul.s(3)).delay()
    real = ResultStore.ack_many
    first = {"left": 1}

    def die_once(self: ResultStore, acks: Any) -> Any:
        if first["left"]:
            first["left"] -= 1
            raise Died()
        return real(self, acks)

    monkeypatch.setattr(ResultStore, "ack_many", die_once)
    with pytest.raises(Died):
        tasks.worker().run_once()  # step 1 sent step 2, then its worker died
    assert drain(tasks.worker()) == 1  # step 2 runs and finishes
    clock.advance(6)
    assert drain(tasks.worker()) == 1  # step 1 again: step 2 is not sent again
    assert handle.get(timeout=1) == 6
    assert tasks.runs("mul") == ["(2, 3)"]


def test_failure_recorded_twice_runs_on_error_once_and_keeps_the_first_fate(
        tasks: Tasks) -> None:
    from minitask.stores.workflow_reads import Failure, frame_of
    handle = chord([tasks.boom.s(1), tasks.add.s(1, 1)], tasks.total.s()).on_error(
        tasks.report.s("twice")).delay()
    worker = tasks.worker()
    job = worker.fetch()
    assert job is not None
    message = job.delivery.message()
    frame = frame_of(message)
    assert frame is not None
    store = tasks.app.broker.workflows
    failure = Failure(message.id, message.task, "ValueError", "boom", "")
    store.fail(frame, failure, tasks.app.clock.now_ms())
    store.fail(frame, failure, tasks.app.clock.now_ms())  # a redelivery dying again
    worker.execute(job)
    drain(worker)
    assert tasks.errors("twice") == [message.id]
    with pytest.raises(TaskFailed, match="boom"):
        handle.get(timeout=1)
    assert tasks.runs("total") == []


def test_poisoned_step_cancels_the_rest_of_its_chain(make_app: Callable[..., Minitask],
                                                     redis_client: "redis.Redis[bytes]",
                                                     clock: ManualClock) -> None:
    tasks = Tasks(make_app("poison", visibility_timeout=5.0, max_deliveries=1), redis_client)
    handle = chain(tasks.add.s(1, 1), tasks.add.s(1)).on_error(tasks.report.s("p")).delay()
    assert tasks.worker().fetch() is not None  # leased, then its worker "died"
    clock.advance(6)
    drain(tasks.worker())  # the fetch dead-letters the poison and fails its chain
    drain(tasks.worker())  # the error callback it sent
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=1)
    assert failed.value.exc_type == "WorkerLost"
    assert len(tasks.errors("p")) == 1


# -- checks before anything is written ---------------------------------------------------

def test_a_bad_signature_anywhere_writes_nothing(tasks: Tasks,
                                                 redis_client: "redis.Redis[bytes]") -> None:
    before = redis_client.dbsize()
    with pytest.raises(ArgumentError, match="add"):
        chain(tasks.add.s(1, 1), tasks.mul.s(2), tasks.add.s(1, 2)).delay()  # 3 args
    with pytest.raises(ArgumentError, match="total"):
        chord([tasks.add.s(1, 1)], tasks.total.s(1)).delay()
    with pytest.raises(EncodeError, match=r"args\[1\]"):
        group(tasks.add.s(1, 1), tasks.add.s(1, object())).delay()
    with pytest.raises(ArgumentError, match="report"):
        tasks.add.s(1, 1).on_error(tasks.report.s()).delay()
    with pytest.raises(ConfigurationError, match="at least one step"):
        chain()
    assert redis_client.dbsize() == before


def test_result_too_large_for_the_next_step_ends_the_step_dead_and_cancels_the_rest(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    # results may be larger than messages (max_result_bytes): the next step's is refused
    tasks = Tasks(make_app("small", max_message_bytes=2000, max_result_bytes=100_000),
                  redis_client)
    handle = chain(tasks.big.s(5000), tasks.collect.s(), tasks.add.si(1, 1)).delay()
    drain(tasks.worker())
    with pytest.raises(TaskFailed) as failed:
        handle.get(timeout=1)
    assert failed.value.exc_type == MessageTooLarge.__name__
    assert [letter.name for letter in tasks.app.dead_letters()] == [tasks.big.name]


def test_tasks_of_two_apps_cannot_share_a_workflow(tasks: Tasks,
                                                   make_app: Callable[..., Minitask]) -> None:
    other = make_app("other")
    stranger = other.task(name="stranger")(lambda x: x)
    with pytest.raises(ConfigurationError, match="one app"):
        chain(tasks.add.s(1, 1), stranger.s()).delay()


def test_workflow_state_expires_with_the_results(tasks: Tasks,
                                                 redis_client: "redis.Redis[bytes]") -> None:
    chord([tasks.add.s(1, 1), tasks.mul.s(2, 2)], tasks.total.s()).delay()
    drain(tasks.worker())
    keys = [key for key in redis_client.keys("minitask:*") if b":once:" in key
            or b":group:" in key]
    assert keys
    assert all(0 < redis_client.pttl(key) <= 86_400_000 for key in keys)


# -- the wire format -------------------------------------------------------------------

def test_messages_without_a_workflow_are_unchanged_and_with_one_round_trip(
        tasks: Tasks) -> None:
    plain = tasks.add.delay(1, 2)
    body = tasks.app.broker.queues.message_body("default", plain.id)
    assert body is not None
    assert "wf" not in msgpack.unpackb(body, raw=False)  # the key, not a random id's letters
    sig: Signature = tasks.add.s(1)
    chain(sig, tasks.add.s(2)).delay(1)
    worker = tasks.worker()
    worker.fetch()
    job = worker.fetch()
    assert job is not None
    message = job.delivery.message()
    assert message.workflow is not None
    assert decode_message(encode_message(message)) == message


def test_get_on_a_chain_waits_for_its_last_step_to_be_sent_and_run(
        tasks: Tasks) -> None:
    """The last step's id exists before the step is enqueued: get() waits for it
    rather than failing at once as for an id nobody ever sent."""
    handle = chain(tasks.add.s(1, 1), tasks.mul.s(3)).delay()
    with pytest.raises(ResultTimeout, match="did not finish within"):
        handle.get(timeout=0.01)  # not yet sent: waited for, not refused as unknown
    drain(tasks.worker())
    assert handle.get(timeout=1) == 6
