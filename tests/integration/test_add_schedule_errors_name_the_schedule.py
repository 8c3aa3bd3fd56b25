"""Every error of ``app.add_schedule`` (and of ``@app.periodic``) names the schedule
(issue 29, probe29p LOW): an argument msgpack cannot carry said "task 'x': cannot
send ...", a bad queue "queue name ... holds '\\x1b'", neither naming the schedule.
The same errors, of the same types and attributes, with the schedule's name in front;
nothing is written. On the suite's redis-server."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from minitask import (ArgumentError, ConfigurationError, EncodeError, MessageTooLarge,
                      MinitaskError, Minitask)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

CASES: Dict[str, Dict[str, Any]] = {
    "an object": {"args": (object(),)},
    "an int past 64 bits": {"args": (2 ** 70,)},
    "a lone surrogate": {"kwargs": {"y": "\udc80"}, "args": (1,)},
    "a set in a list": {"args": ([{1, 2}],)},
    "an escape in the queue": {"queue": "night\x1b", "args": (1,)},
    "a space in the queue": {"queue": "night shift", "args": (1,)},
    "a queue that is no str": {"queue": 5, "args": (1,)},
    "a brace in the queue": {"queue": "a{b}", "args": (1,)},
    "arguments that do not fit": {"args": (1, 2, 3)},
    "a priority of 12": {"priority": 12, "args": (1,)},
    "an unknown task": {"task": "nosuch", "args": (1,)},
    "an every of nan": {"every": float("nan"), "args": (1,)},
    "a message too large": {"args": ("x" * 2_000_000,)},
}


@pytest.fixture
def app(redis_server: RedisServer, admin: Any) -> Any:
    app = Minitask("naming", broker=redis_server.url)

    @app.task(name="add", queue="q1")
    def add(x: int, y: Any = 0) -> int:
        return x

    yield app
    app.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_add_schedule_error_names_the_schedule(app: Minitask, admin: Any,
                                                     case: str) -> None:
    given = dict(CASES[case])
    task = given.pop("task", "add")
    given.setdefault("every", 60.0)
    with pytest.raises(MinitaskError) as refused:
        app.add_schedule("nightly-42", task, **given)
    said = str(refused.value)
    assert said.startswith("schedule 'nightly-42': "), said
    assert said.count("schedule 'nightly-42'") == 1, said
    assert isinstance(refused.value, (ConfigurationError, ArgumentError, EncodeError,
                                      MessageTooLarge))
    if isinstance(refused.value, EncodeError):
        assert refused.value.task_name == "add" and refused.value.path  # kept
    assert app.schedules() == [] and not admin.keys("*schedules*")


def test_a_decorated_schedule_s_errors_name_it_too(app: Minitask) -> None:
    with pytest.raises(EncodeError, match=r"^schedule 'per': task 'per': cannot send"):
        app.periodic(every=5.0, name="per", args=(object(),))(lambda x=None: x)
    with pytest.raises(ConfigurationError, match=r"^task 'per2': queue name 'a\\x1b' holds"):
        app.periodic(every=5.0, name="per2", queue="a\x1b")(lambda x=None: x)
    assert "per" not in app.tasks and "per2" not in app.tasks
