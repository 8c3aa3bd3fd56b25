"""Dead letters planted in Redis (issue 29, probe 18): one whose message names another
task id is not requeued (a worker would run it, and record its outcome, under that
other id), saying so and naming both ids; ``dead purge --all --queue`` on a queue whose
dead set is of another type names the key and the problem."""
from __future__ import annotations

import dataclasses
from typing import Callable, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.errors import BrokerError
from minitask.admin import revive_dead
from minitask.broker.keys import queue_keys
from minitask.wire.serializer import decode_message, encode_message
from tests.support.draining import drain


def _dead_letter(make_app: Callable[..., Minitask]) -> Tuple[Minitask, str]:
    app = make_app("shop")

    @app.task(name="shop.boom", retries=0)
    def boom() -> None:
        raise ValueError("boom")

    handle = boom.delay()
    drain(app.worker(["default"]))
    assert handle.status() == "failed"
    return app, handle.id


def test_a_dead_letter_whose_message_names_another_id_is_not_requeued(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app, task_id = _dead_letter(make_app)
    keys = queue_keys(app.name, "default")
    body = redis_client.hget(keys.messages, task_id)
    assert body is not None
    other = "other000000000000000001"
    redis_client.hset(keys.messages, task_id,
                      encode_message(dataclasses.replace(decode_message(body), id=other)))
    answer = revive_dead(app, "default", task_id)
    assert "another task id" in answer and other in answer and task_id in answer, answer
    assert not app.requeue_dead(task_id)
    assert [letter.task_id for letter in app.dead_letters()] == [task_id]
    assert app.broker.queues.counts_many(["default"])["default"]["ready"] == 0


def test_purge_all_of_a_queue_whose_dead_set_is_another_type_names_the_key(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app = make_app("shop")

    @app.task(name="shop.add", queue="c")
    def add() -> None:
        """A task of queue c."""

    app.broker.queues.register_queues(["c"])
    dead = queue_keys(app.name, "c").dead
    redis_client.set(dead, b"not a sorted set")
    with pytest.raises(BrokerError) as caught:
        app.purge_dead(queue="c")
    assert dead in str(caught.value) and "another type" in str(caught.value), caught.value
