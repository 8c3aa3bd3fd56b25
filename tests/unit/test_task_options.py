"""@app.task options, enqueue-time checks, and the rule that a failed enqueue writes nothing."""
from __future__ import annotations

import datetime as dt
import sys
import types
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import fakeredis
import pytest
import minitask
from minitask import (ArgumentError, ConfigurationError, DuplicateTaskError, EncodeError,
                      MessageTooLarge, Minitask, Task)
from minitask.broker.keys import QueueKeys

UTC = dt.timezone.utc


def snapshot(client: Any) -> Dict[Any, Tuple[Any, Any]]:
    """Every key with its type and full content: equal snapshots mean Redis is unchanged."""
    state: Dict[Any, Tuple[Any, Any]] = {}
    for key in client.keys("*"):
        kind = client.type(key)
        if kind == b"string":
            value: Any = client.get(key)
        elif kind == b"hash":
            value = client.hgetall(key)
        elif kind == b"zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"list":
            value = client.lrange(key, 0, -1)
        else:
            value = client.smembers(key)
        state[key] = (kind, value)
    return state


pytestmark = pytest.mark.app("shop")


@pytest.fixture
def primed(app: Minitask, fake_redis: Any) -> Any:
    """Redis already holding one queued and one scheduled task, so 'unchanged' means something."""
    @app.task(name="primer")
    def primer(n: int) -> int:
        return n

    primer.delay(1)
    primer.apply_in(60, 2)
    assert fake_redis.dbsize() > 0
    return fake_redis


def module_level_function(x: int) -> int:
    return x * 2


class Mailer:
    @staticmethod
    def send(address: str) -> str:
        return address


# -- the decorator --------------------------------------------------------------

def test_bare_decorator_registers_a_task_named_module_dot_qualname(app: Minitask) -> None:
    task = app.task(module_level_function)
    assert isinstance(task, Task)
    assert task.name == f"{__name__}.module_level_function"
    assert task.queue == "default"
    assert task.priority == 5
    assert app.tasks[task.name] is task


def test_default_name_uses_the_qualified_name_of_a_method(app: Minitask) -> None:
    task = app.task(Mailer.send)
    assert task.name == f"{__name__}.Mailer.send"


def test_decorator_with_options_resolves_name_queue_and_priority(app: Minitask) -> None:
    @app.task(queue="emails", priority=9, retries=3, timeout=60, name="emails.reset")
    def send_reset(user_id: int) -> None:
        pass

    assert send_reset.name == "emails.reset"
    assert send_reset.queue == "emails"
    assert send_reset.priority == 9
    assert app.tasks["emails.reset"] is send_reset


def test_decorator_with_empty_parentheses_uses_defaults(app: Minitask) -> None:
    @app.task()
    def ping() -> str:
        return "pong"

    assert ping.queue == "default" and ping.priority == 5
    assert ping.name.endswith(".ping")


def test_task_queue_defaults_to_the_app_default_queue(fake_redis: Any) -> None:
    app = Minitask("shop", broker=fake_redis, default_queue="main")

    @app.task
    def ping() -> None:
        pass

    assert ping.queue == "main"


def test_task_defined_in_a_script_gets_the_name_it_would_have_when_imported(
        app: Minitask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "pkg" / "script.py"
    script.parent.mkdir()
    script.write_text("")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    main.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)

    def job() -> None:
        pass
    job.__module__ = "__main__"
    job.__qualname__ = "job"
    assert app.task(job).name == "pkg.script.job"


def test_task_defined_in_a_module_run_with_dash_m_gets_its_module_name(
        app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="shop.jobs")  # type: ignore[assignment]
    monkeypatch.setitem(sys.modules, "__main__", main)

    def job() -> None:
        pass
    job.__module__ = "__main__"
    job.__qualname__ = "job"
    assert app.task(job).name == "shop.jobs.job"


@pytest.mark.parametrize("priority", [10, -1, 100, 5.0, "5", True, None])
def test_priority_outside_0_to_9_or_not_an_int_is_refused_at_decoration(
        app: Minitask, priority: Any) -> None:
    def job() -> None:
        pass

    with pytest.raises(ConfigurationError) as caught:
        app.task(priority=priority)(job)
    assert isinstance(caught.value, ValueError)
    assert "priority" in str(caught.value)
    assert app.tasks == {}


@pytest.mark.parametrize("priority", [0, 9])
def test_priority_bounds_are_accepted(app: Minitask, priority: int) -> None:
    @app.task(priority=priority)
    def job() -> None:
        pass

    assert job.priority == priority


def test_unknown_decorator_option_raises_value_error_naming_it(app: Minitask) -> None:
    with pytest.raises(ValueError) as caught:
        @app.task(queue="emails", max_retries=3)
        def job() -> None:
            pass
    assert isinstance(caught.value, ConfigurationError)
    assert "max_retries" in str(caught.value)
    assert app.tasks == {}


@pytest.mark.parametrize("options", [
    {"retries": -1}, {"retries": 1.5}, {"retry_on": ("not an exception",)},
    {"retry_on": 42}, {"timeout": -1}, {"retry_backoff": "1"}, {"result_ttl": -5},
    {"queue": "bad:queue"}, {"queue": "has space"}, {"queue": "{tag}"},
], ids=repr)
def test_invalid_option_value_is_refused_at_decoration(app: Minitask,
                                                       options: Dict[str, Any]) -> None:
    def job() -> None:
        pass

    with pytest.raises(ConfigurationError):
        app.task(**options)(job)
    assert app.tasks == {}


def test_unknown_app_option_is_refused() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Minitask("shop", broker="redis://127.0.0.1:1/0", visibilty_timeout=3)
    assert "visibilty_timeout" in str(caught.value)


@pytest.mark.parametrize("name,options", [
    ("shop:eu", {}), ("", {}), ("my shop", {}), ("{shop}", {}),
    ("shop", {"default_queue": "a:b"}), ("shop", {"visibility_timeout": 0.5}),
    ("shop", {"max_deliveries": 0}), ("shop", {"result_ttl": 0}),
], ids=repr)
def test_invalid_app_name_or_option_is_refused_without_io(name: str,
                                                          options: Dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        Minitask(name, broker="redis://127.0.0.1:1/0", **options)


def test_client_that_decodes_responses_is_refused() -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
    app = Minitask("shop", broker=client)

    @app.task
    def job() -> None:
        pass

    with pytest.raises(ConfigurationError) as caught:
        job.delay()
    assert "decode_responses" in str(caught.value)
    assert client.dbsize() == 0


def test_creating_an_app_and_its_tasks_does_no_io() -> None:
    # Nothing listens on port 1: any connection attempt would raise BrokerError.
    app = Minitask("shop", broker="redis://127.0.0.1:1/0")

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    assert add(2, 3) == 5
    assert app.worker_queues() == ["default"]


def test_calling_the_task_runs_the_function_inline_and_touches_no_redis(
        app: Minitask, fake_redis: Any) -> None:
    calls = []

    @app.task
    def add(x: int, y: int) -> int:
        calls.append((x, y))
        assert minitask.current_task() is None  # not a worker attempt
        return x + y

    assert add(2, 3) == 5
    assert add(x=1, y=1) == 2
    assert calls == [(2, 3), (1, 1)]
    assert fake_redis.dbsize() == 0


def test_calling_the_task_inline_raises_the_function_exception(app: Minitask) -> None:
    @app.task
    def boom() -> None:
        raise KeyError("inline")

    with pytest.raises(KeyError):
        boom()


def test_duplicate_name_with_a_different_function_raises_duplicate_task_error(
        app: Minitask) -> None:
    @app.task(name="shared")
    def first() -> int:
        return 1

    with pytest.raises(DuplicateTaskError) as caught:
        @app.task(name="shared")
        def second() -> int:
            return 2
    assert isinstance(caught.value, ConfigurationError)
    assert isinstance(caught.value, ValueError)
    assert "shared" in str(caught.value)
    assert app.tasks["shared"] is first


def test_registering_the_same_function_again_is_not_a_duplicate(app: Minitask) -> None:
    app.task(module_level_function)
    again = app.task(module_level_function)
    assert app.tasks[again.name] is again


# -- enqueue-time checks: each raises and leaves Redis unchanged ------------------------

def test_signature_mismatch_at_delay_raises_argument_error_naming_the_task(
        app: Minitask, primed: Any) -> None:
    @app.task(name="shop.add")
    def add(x: int, y: int) -> int:
        return x + y

    loose: Any = add  # the wrong calls below are the point
    before = snapshot(primed)
    calls: List[Callable[[], Any]] = [
        lambda: loose.delay(1), lambda: loose.delay(1, 2, 3),
        lambda: loose.delay(1, 2, z=3), lambda: loose.delay(1, x=1)]
    for call in calls:
        with pytest.raises(ArgumentError) as caught:
            call()
        assert isinstance(caught.value, TypeError)
        assert caught.value.task_name == "shop.add"
        assert "'shop.add'" in str(caught.value)
    assert snapshot(primed) == before


def test_argument_counts_are_checked_against_defaults_varargs_and_keyword_only(
        app: Minitask, primed: Any) -> None:
    @app.task(name="shop.tag")
    def tag(item: str, label: str = "new") -> str:
        return item + label

    @app.task(name="shop.many")
    def many(*items: str) -> int:
        return len(items)

    @app.task(name="shop.keyed")
    def keyed(item: str, *, label: str) -> str:
        return item + label

    tag.delay("lamp")
    tag.delay("lamp", "old")
    many.delay()
    many.delay("a", "b", "c")
    keyed.delay("lamp", label="old")
    before = snapshot(primed)
    wrong: List[Tuple[Any, Tuple[str, ...]]] = [
        (tag, ()), (tag, ("lamp", "old", "extra")), (keyed, ("lamp",))]
    for task, args in wrong:
        with pytest.raises(ArgumentError):
            task.delay(*args)
    assert snapshot(primed) == before


def test_signature_mismatch_is_checked_by_every_enqueue_method(app: Minitask,
                                                               primed: Any) -> None:
    @app.task(name="shop.add")
    def add(x: int, y: int) -> int:
        return x + y

    loose: Any = add  # the wrong calls below are the point
    before = snapshot(primed)
    with pytest.raises(ArgumentError):
        loose.apply_in(5, 1)
    with pytest.raises(ArgumentError):
        loose.apply_at(dt.datetime(2040, 1, 1, tzinfo=UTC), 1, 2, 3)
    with pytest.raises(ArgumentError):
        add.apply_async(args=(1,), kwargs={"nope": 2})
    with pytest.raises(ArgumentError):
        add.delay_many([(1, 2), (3, 4), (5,)])
    assert snapshot(primed) == before


def test_unsupported_argument_raises_encode_error_with_path_and_writes_nothing(
        app: Minitask, primed: Any) -> None:
    @app.task(name="shop.ship")
    def ship(order: Any, options: Any = None) -> None:
        pass

    before = snapshot(primed)
    with pytest.raises(EncodeError) as caught:
        ship.delay({"id": 1}, options={"x": [1, 2, object()]})
    assert isinstance(caught.value, TypeError)
    assert caught.value.path == "kwargs['options']['x'][2]"
    assert "'shop.ship'" in str(caught.value)
    with pytest.raises(EncodeError) as caught:
        ship.delay([1, {"when": dt.datetime(2030, 1, 1)}])
    assert caught.value.path == "args[0][1]['when']"
    assert snapshot(primed) == before


def test_int_beyond_64_bits_is_refused_at_enqueue(app: Minitask, primed: Any) -> None:
    @app.task
    def count(n: int) -> None:
        pass

    before = snapshot(primed)
    with pytest.raises(EncodeError):
        count.delay(2 ** 64)
    assert snapshot(primed) == before


def test_message_over_max_message_bytes_raises_message_too_large(
        fake_redis: Any, clock: Any) -> None:
    app = Minitask("shop", broker=fake_redis, clock=clock, max_message_bytes=1000)

    @app.task(name="shop.store")
    def store(blob: bytes) -> None:
        pass

    small = store.delay(b"x" * 100)
    before = snapshot(fake_redis)
    with pytest.raises(MessageTooLarge) as caught:
        store.delay(b"x" * 2000)
    assert isinstance(caught.value, ValueError)
    assert caught.value.size > caught.value.limit == 1000
    assert "shop.store" in str(caught.value)
    assert snapshot(fake_redis) == before
    assert small.status() == "queued"


def test_delay_many_checks_every_call_before_sending_any(fake_redis: Any, clock: Any) -> None:
    app = Minitask("shop", broker=fake_redis, clock=clock, max_message_bytes=1000)

    @app.task
    def store(blob: Any) -> None:
        pass

    store.delay(b"seed")
    before = snapshot(fake_redis)
    with pytest.raises(MessageTooLarge):
        store.delay_many([(b"a",), (b"b",), (b"x" * 5000,), (b"c",)])
    with pytest.raises(EncodeError):
        store.delay_many([(b"a",), ({1, 2},)])
    assert snapshot(fake_redis) == before


def test_unknown_apply_async_option_raises_value_error_and_writes_nothing(
        app: Minitask, primed: Any) -> None:
    @app.task
    def job(x: int) -> None:
        pass

    before = snapshot(primed)
    with pytest.raises(ValueError) as caught:
        job.apply_async((1,), countdown=5)
    assert isinstance(caught.value, ConfigurationError)
    assert "countdown" in str(caught.value)
    assert snapshot(primed) == before


@pytest.mark.parametrize("options", [
    {"priority": 10}, {"priority": -1}, {"priority": "9"}, {"priority": 2.0},
    {"queue": "bad:queue"}, {"task_id": ""}, {"eta": dt.datetime(2030, 1, 1)},
    {"eta": "tomorrow"},
], ids=repr)
def test_invalid_apply_async_option_raises_value_error_and_writes_nothing(
        app: Minitask, primed: Any, options: Dict[str, Any]) -> None:
    @app.task
    def job(x: int) -> None:
        pass

    before = snapshot(primed)
    with pytest.raises(ValueError):
        job.apply_async((1,), **options)
    assert snapshot(primed) == before


def test_apply_at_with_a_naive_datetime_is_rejected_and_writes_nothing(
        app: Minitask, primed: Any) -> None:
    @app.task
    def job() -> None:
        pass

    before = snapshot(primed)
    with pytest.raises(ConfigurationError) as caught:
        job.apply_at(dt.datetime(2030, 1, 1, 12, 0))
    assert isinstance(caught.value, ValueError)
    assert snapshot(primed) == before


# -- when a call becomes due ------------------------------------------------------------

def delayed_due_ms(client: Any, app: Minitask, queue: str, task_id: str) -> int:
    score = client.zscore(QueueKeys(app.name, queue).delayed, task_id)
    assert score is not None, f"{task_id} is not scheduled"
    return int(score) // 10


@pytest.mark.parametrize("seconds", [0, 0.0, -1, -3600.5])
def test_apply_in_zero_or_negative_means_now(app: Minitask, fake_redis: Any, clock: Any,
                                             seconds: float) -> None:
    ran = []

    @app.task
    def job(x: int) -> None:
        ran.append(x)

    handle = job.apply_in(seconds, 7)
    assert handle.status() == "queued"
    assert fake_redis.zcard(QueueKeys("shop", "default").delayed) == 0
    app.worker(burst=True).run()  # the clock does not move
    assert ran == [7]
    assert handle.status() == "succeeded"


def test_apply_in_schedules_the_call_that_many_seconds_ahead(app: Minitask, fake_redis: Any,
                                                             clock: Any) -> None:
    @app.task
    def job() -> None:
        pass

    handle = job.apply_in(2.5)
    assert handle.status() == "scheduled"
    assert delayed_due_ms(fake_redis, app, "default", handle.id) == clock.ms + 2500


def test_apply_in_passes_a_seconds_keyword_to_the_function(app: Minitask,
                                                           fake_redis: Any, clock: Any) -> None:
    @app.task
    def wait(seconds: int) -> int:
        return seconds

    handle = wait.apply_in(10, seconds=3)
    assert delayed_due_ms(fake_redis, app, "default", handle.id) == clock.ms + 10_000
    clock.advance(10)
    app.worker(burst=True).run()
    assert handle.get(timeout=5) == 3


def test_apply_at_with_an_aware_datetime_schedules_at_that_instant(
        app: Minitask, fake_redis: Any, clock: Any) -> None:
    @app.task
    def job() -> None:
        pass

    when = dt.datetime.fromtimestamp(clock.ms / 1000 + 90, tz=dt.timezone(dt.timedelta(hours=5)))
    handle = job.apply_at(when)
    assert handle.status() == "scheduled"
    assert delayed_due_ms(fake_redis, app, "default", handle.id) == clock.ms + 90_000


def test_apply_at_with_a_unix_timestamp_schedules_at_that_instant(
        app: Minitask, fake_redis: Any, clock: Any) -> None:
    @app.task
    def job() -> None:
        pass

    handle = job.apply_at(clock.ms / 1000 + 30.25)
    assert delayed_due_ms(fake_redis, app, "default", handle.id) == clock.ms + 30_250


def test_apply_at_in_the_past_is_queued_now(app: Minitask, clock: Any) -> None:
    @app.task
    def job() -> None:
        pass

    assert job.apply_at(clock.ms / 1000 - 60).status() == "queued"
    past = dt.datetime(2000, 1, 1, tzinfo=UTC)
    assert job.apply_at(past).status() == "queued"


def test_apply_async_delay_and_eta_schedule_the_call(app: Minitask, fake_redis: Any,
                                                     clock: Any) -> None:
    @app.task
    def job() -> None:
        pass

    by_delay = job.apply_async(delay=4)
    by_eta = job.apply_async(eta=clock.ms / 1000 + 8)
    now = job.apply_async(delay=0)
    assert delayed_due_ms(fake_redis, app, "default", by_delay.id) == clock.ms + 4000
    assert delayed_due_ms(fake_redis, app, "default", by_eta.id) == clock.ms + 8000
    assert now.status() == "queued"


def test_apply_async_options_override_the_decorator(app: Minitask, fake_redis: Any) -> None:
    @app.task(queue="emails", priority=2)
    def job(x: int) -> int:
        return x

    handle = job.apply_async((1,), queue="urgent", priority=8, task_id="my-id")
    assert handle.id == "my-id"
    assert handle.status() == "queued"
    assert app.broker.queues.counts("urgent")["ready_by_priority"] == {"8": 1}
    assert app.broker.queues.counts("emails")["ready"] == 0
    job_ = app.worker(queues=["urgent"]).fetch()
    assert job_ is not None and job_.delivery.priority == 8


def test_function_arguments_named_like_options_reach_the_function(
        app: Minitask) -> None:
    @app.task
    def echo(queue: str, priority: int, delay: float, eta: str, task_id: str,
             when: str) -> Any:
        return [queue, priority, delay, eta, task_id, when]

    handle = echo.delay(queue="q", priority=99, delay=1.5, eta="e", task_id="t", when="w")
    assert handle.status() == "queued"  # went to the task's own queue, at its own priority
    at = echo.apply_at(0, "q2", 1, 2.0, "e2", "t2", when="w2")
    app.worker(burst=True).run()
    assert handle.get(timeout=5) == ["q", 99, 1.5, "e", "t", "w"]
    assert at.get(timeout=5) == ["q2", 1, 2.0, "e2", "t2", "w2"]
