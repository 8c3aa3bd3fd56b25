"""An int too long for ``repr`` (over 4,300 digits) or for a float, given where
minitask takes a number or a value, is refused as minitask's own error naming the
task (or schedule, or handle) and what was given (issue 29, probe31 L1: Python's
ValueError "Exceeds the limit (4300 digits)" or OverflowError "int too large to
convert to float", which name nothing). A task returning one fails with an
EncodeError naming the return value, not a ValueError that reads like its own."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

from minitask import ConfigurationError, EncodeError, Minitask, TaskFailed
from minitask.printable import short_repr, shown_value

HUGE = 10 ** 5000  # repr() raises
WIDE = 2 ** 1100  # a float cannot hold it
SHOWN = "<an int of 16,610 bits>"


@pytest.fixture
def app(make_app: Callable[..., Minitask]) -> Minitask:
    app = make_app()

    @app.task(name="add")
    def add(x: Any, y: Any = 0) -> Any:
        return x

    return app


SENDS = {
    "delay": (lambda app: app.tasks["add"].delay(HUGE, 1), EncodeError, "args[0]"),
    "signature": (lambda app: app.tasks["add"].s(HUGE, 1).delay(), EncodeError, "args[0]"),
    "kwarg": (lambda app: app.tasks["add"].delay(x=HUGE), EncodeError, "kwargs['x']"),
    "dict key": (lambda app: app.tasks["add"].delay({HUGE: 1}), EncodeError, "args[0] key"),
    "apply_in": (lambda app: app.tasks["add"].apply_in(HUGE, 1), ConfigurationError,
                 "apply_in of"),
    "apply_in wide": (lambda app: app.tasks["add"].apply_in(WIDE, 1), ConfigurationError,
                      "ends after year 9999"),
    "apply_at": (lambda app: app.tasks["add"].apply_at(HUGE, 1), ConfigurationError, "eta"),
    "apply_at wide": (lambda app: app.tasks["add"].apply_at(WIDE, 1), ConfigurationError,
                      "after the end of year 9999"),
    "aapply_in": (lambda app: asyncio.run(app.tasks["add"].aapply_in(HUGE, 1)),
                  ConfigurationError, "apply_in of"),
    "priority": (lambda app: app.tasks["add"].apply_async((1,), priority=HUGE),
                 ConfigurationError, "priority must be an int from 0 to 9"),
    "task_id": (lambda app: app.tasks["add"].apply_async((1,), task_id=HUGE),
                ConfigurationError, "task_id must be a non-empty str"),
    "expires": (lambda app: app.tasks["add"].apply_async((1,), expires=HUGE),
                ConfigurationError, "expires must be"),
    "debounce": (lambda app: app.tasks["add"].apply_async((1,), debounce=HUGE, task_id="d"),
                 ConfigurationError, "debounce must be"),
    "delay option": (lambda app: app.tasks["add"].apply_async((1,), delay=HUGE),
                     ConfigurationError, "delay"),
}


@pytest.mark.parametrize("case", sorted(SENDS))
def test_a_huge_int_in_a_call_is_refused_naming_the_task(app: Minitask, case: str) -> None:
    call, error, said = SENDS[case]
    with pytest.raises(error) as caught:
        call(app)
    text = str(caught.value)
    assert text.startswith("task 'add'") and said in text, text
    assert "<an int of" in text or "1358298529" in text, text


OPTIONS = ["timeout", "soft_timeout", "retry_backoff", "result_ttl", "priority", "retries",
           "max_running", "retry_backoff_max", "rate_limit", "ignore_result", "retry_on"]


@pytest.mark.parametrize("option", OPTIONS)
def test_a_huge_int_as_a_task_option_is_refused_naming_it(app: Minitask, option: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        app.task(name="opts", **{option: HUGE})(lambda: 1)
    text = str(caught.value)
    assert text.startswith("task 'opts'") and option in text and SHOWN in text, text


@pytest.mark.parametrize("every", [HUGE, WIDE], ids=["huge", "wide"])
def test_a_huge_every_is_refused_naming_the_schedule(app: Minitask, every: int) -> None:
    with pytest.raises(ConfigurationError, match="schedule 'e3': every must be a number"):
        app.periodic(every=every, name="e3")(lambda: 1)
    with pytest.raises(ConfigurationError, match="schedule 's9': every must be a number"):
        app.add_schedule("s9", app.tasks["add"], every=every, args=(1,))
    with pytest.raises(ConfigurationError, match="schedule 'c1': give exactly one of"):
        app.periodic(every=every, cron=HUGE, name="c1")(lambda: 1)


@pytest.mark.parametrize("timeout", [HUGE, WIDE], ids=["huge", "wide"])
def test_a_wait_past_a_float_is_refused_naming_the_wait(app: Minitask, timeout: int) -> None:
    handle = app.tasks["add"].delay(1)
    with pytest.raises(ConfigurationError, match=r"get\(\) on task .*timeout must be"):
        handle.get(timeout=timeout)
    with pytest.raises(ConfigurationError, match=r"aget\(\) on task .*timeout must be"):
        asyncio.run(handle.aget(timeout=timeout))


def test_app_options_refuse_a_huge_int(make_app: Callable[..., Minitask]) -> None:
    for option in ("visibility_timeout", "result_ttl"):
        with pytest.raises(ConfigurationError, match=f"{option} must be .*{SHOWN}"):
            make_app("x", **{option: HUGE})


def test_a_task_returning_a_huge_int_fails_as_minitask_could_not_send_it(
        app: Minitask) -> None:
    @app.task(name="huge")
    def huge() -> int:
        return HUGE

    handle = huge.delay()
    worker = app.worker()
    assert worker.run_once()
    with pytest.raises(TaskFailed) as caught:
        handle.get(timeout=1)
    assert caught.value.exc_type == "EncodeError"
    assert caught.value.message == (f"task 'huge': cannot send {SHOWN} at return value: "
                                    f"integers must fit in signed 64 bits; send it as a str")


@pytest.mark.parametrize("shown", [short_repr, shown_value])
def test_the_shown_value_of_a_huge_int_is_its_size(shown: Callable[[Any], str]) -> None:
    assert shown(HUGE) == SHOWN
    assert shown([1, {HUGE: -HUGE}]) == f"[1, {{{SHOWN}: <an int of 16,610 bits>}}]"
    assert shown(2 ** 64) == repr(2 ** 64)
