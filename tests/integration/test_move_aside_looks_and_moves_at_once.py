"""Moving a key of another type aside looks at its type and moves it in one step
(move_aside.lua). A process pool's supervisor and child each add their metrics: both met
the same planted key, the first moved it and wrote a new hash of counts, and the second,
which had looked before, moved that hash of real counts aside too, onto the planted
copy's place (the foreign-data property test lost both, now and then)."""
from __future__ import annotations

from typing import Any

import pytest

from minitask.stores.foreign import move_aside

pytestmark = pytest.mark.integration

KEY = "minitask:{app}:metrics"


def test_a_key_of_the_kind_kept_there_is_left_in_place(redis_client: Any) -> None:
    redis_client.hset(KEY, "tasks", 3)  # what the first mover wrote after its move

    move_aside(redis_client, KEY, "hash")  # the second mover, which looked before

    assert redis_client.hgetall(KEY) == {b"tasks": b"3"}
    assert not redis_client.exists(f"{KEY}:foreign")


def test_the_second_of_two_movers_keeps_the_first_ones_copy_and_counts(
        redis_client: Any) -> None:
    redis_client.sadd(KEY, "planted")

    move_aside(redis_client, KEY, "hash")
    redis_client.hincrby(KEY, "tasks", 1)  # the first mover's counts, written again
    move_aside(redis_client, KEY, "hash")

    assert redis_client.smembers(f"{KEY}:foreign") == {b"planted"}
    assert redis_client.hgetall(KEY) == {b"tasks": b"1"}
    assert not redis_client.exists(f"{KEY}:foreign2")


@pytest.mark.parametrize("kind, typed", [("sorted set", "zset"), ("list", "list")])
def test_each_kind_is_named_as_type_names_it(redis_client: Any, kind: str, typed: str) -> None:
    redis_client.set(KEY, "planted")

    move_aside(redis_client, KEY, kind)

    assert redis_client.get(f"{KEY}:foreign") == b"planted"
    assert not redis_client.exists(KEY)
    if typed == "zset":
        redis_client.zadd(KEY, {"w": 1})
    else:
        redis_client.rpush(KEY, "order")
    move_aside(redis_client, KEY, kind)
    assert redis_client.type(KEY).decode() == typed
