"""A workflow is checked whole before anything is sent: a task id chosen for two
steps, or already taken by a task still in Redis, is refused with the ids named (that
step would never be sent, and what waits for it would never run); a step that cannot
take the previous result says so, and how to write a step that takes none."""
from __future__ import annotations

from typing import Any, List

import pytest
import redis

from minitask import ArgumentError, ConfigurationError, Minitask, chain, chord, group
from tests.support.draining import drain


def keys(client: "redis.Redis[bytes]") -> List[bytes]:
    return sorted(client.keys("*"))


@pytest.fixture
def add(app: Minitask) -> Any:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    return add


@pytest.mark.parametrize("build", [
    lambda add: chain(add.s(1, 2).set(task_id="same"), add.s(3).set(task_id="same")),
    lambda add: group(add.s(1, 2).set(task_id="same"), add.s(3, 4).set(task_id="same")),
    lambda add: chord([add.s(1, 2).set(task_id="same")], add.s(5).set(task_id="same")),
])
def test_an_id_given_to_two_steps_is_refused_and_nothing_is_sent(
        app: Minitask, add: Any, fake_redis: "redis.Redis[bytes]", build: Any) -> None:
    before = keys(fake_redis)
    with pytest.raises(ConfigurationError, match="'same' are given to more than one step"):
        build(add).delay()
    assert keys(fake_redis) == before


def test_an_id_of_a_task_still_pending_is_refused_and_nothing_is_sent(
        app: Minitask, add: Any, fake_redis: "redis.Redis[bytes]") -> None:
    add.apply_async((1, 1), task_id="taken")
    before = keys(fake_redis)
    with pytest.raises(ConfigurationError, match=r"'taken' \(queued\) belong to tasks still"):
        group(add.s(1, 2), add.s(3, 4).set(task_id="taken")).delay()
    assert keys(fake_redis) == before


def test_an_id_whose_task_has_finished_may_be_chosen_again(app: Minitask, add: Any) -> None:
    add.apply_async((1, 1), task_id="done-before")
    drain(app.worker(burst=True))
    handle = chain(add.s(1, 2).set(task_id="done-before"), add.s(3)).delay()
    drain(app.worker(burst=True))
    assert handle.get(timeout=0) == 6


def test_a_step_that_cannot_take_the_previous_result_says_how_to_write_it(
        app: Minitask, add: Any) -> None:
    with pytest.raises(ArgumentError) as refused:
        chain(add.s(1, 2), add.s(1, 2)).delay()
    text = str(refused.value)
    assert "workflow step " in text and ".add.s(1, 2): " in text
    assert "gets that step's result as its first argument" in text
    assert ".si(...) makes a step that takes none" in text
    chain(add.s(1, 2), add.si(1, 2)).delay()  # the immutable step is fine
