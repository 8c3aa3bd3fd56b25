"""The links a worker follows from a workflow group to the next, read from Redis, are
walked a bounded number of times: a group whose "what follows" joins back into a group
the walk joined already (a cycle), or a chain of planted groups longer than
``JOIN_DEPTH``, is corrupt state that ends the chord's body naming the group's key,
as other corrupt group state does (probe 19 H1: the walk recursed until RecursionError,
the member's dead-lettering walked into the same cycle, and the member stayed
"running" for ever, or crash-looped a process pool child). And whatever a workflow's
walk raises as a task is dead-lettered, its dead letter is recorded all the same."""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import pytest
import redis

from minitask import Minitask, chord, group
from minitask.errors import DecodeError, EncodeError
from minitask.stores.workflow_links import JOIN_DEPTH, end_of, follow_of, joined, nesting
from minitask.wire.serializer import pack_data
from tests.support.chords import body_ended, sent_chord


def join_of(q: str, id: str, i: int = 0) -> Dict[str, Any]:  # noqa: A002 (its fields)
    return {"k": "join", "q": q, "id": id, "i": i, "ttl": 60_000}


def where(group_key: bytes) -> Dict[str, str]:
    """The queue and id of the group whose state is ``group_key``."""
    queue = group_key.split(b"{", 1)[1].split(b"}", 1)[0].split(b":", 1)[1].decode()
    return {"q": queue, "id": group_key.split(b":group:", 1)[1].decode()}


def test_joined_refuses_a_group_already_joined_and_one_too_far_out() -> None:
    path = joined(join_of("q", "a"), ())
    path = joined(join_of("q", "b"), path)
    assert path == (("q", "a"), ("q", "b"))
    with pytest.raises(DecodeError, match=r"a cycle: a -> b -> a"):
        joined(join_of("q", "a"), path)
    assert joined(join_of("other", "a"), path)[-1] == ("other", "a")  # another queue's
    deep = tuple(("q", f"g{index}") for index in range(JOIN_DEPTH))
    with pytest.raises(DecodeError, match=f"more than {JOIN_DEPTH} deep"):
        joined(join_of("q", "one-more"), deep)
    joined(join_of("q", "last"), deep[:-1])  # JOIN_DEPTH groups in all: walked


def test_nesting_counts_groups_and_chords_held_in_one_another() -> None:
    task = {"k": "t"}
    assert nesting(task) == 0
    inner = {"k": "h", "header": [task, {"k": "g", "members": [task]}], "body": task}
    assert nesting({"k": "c", "steps": [task, {"k": "g", "members": [inner, task]}]}) == 3


def test_follow_of_refuses_a_continuation_that_ends_back_in_the_walk() -> None:
    then = {"k": "then", "node": {"k": "c", "steps": []}, "next": join_of("q", "a")}
    assert end_of(then) == join_of("q", "a")
    assert end_of({"k": "then", "node": {}, "next": None}) is None
    packed = pack_data(join_of("q", "a"), "x")
    with pytest.raises(DecodeError, match="a cycle"):
        follow_of(join_of("q", "a"), packed, (("q", "a"),))
    assert follow_of(join_of("q", "b"), packed, (("q", "b"),)) == join_of("q", "a")


PLANTS: Dict[str, Callable[[Dict[str, str]], Dict[str, bytes]]] = {
    # what follows the group joins the group itself
    "joins itself": lambda group: {"next": pack_data(join_of(**group), "x")},
    # the same, in a group whose size is no number: its state is read to cancel what
    # follows it, and that joins back into it
    "joins itself, size unreadable": lambda group: {
        "size": b"abc", "next": pack_data(join_of(**group), "x")},
    # a step that follows, and then the group again
    "joins itself after a step": lambda group: {"next": pack_data(
        {"k": "then", "node": {"k": "g", "id": "empty", "q": group["q"], "ttl": 60_000,
                               "members": []}, "next": join_of(**group)}, "x")},
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_group_joining_back_into_itself_ends_the_body_naming_the_key(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        plant: str) -> None:
    app, seen, handle, group_key = sent_chord(make_app, redis_client)
    redis_client.hset(group_key, mapping=PLANTS[plant](where(group_key)))  # type: ignore
    messages = body_ended(app, seen, handle, "the group cannot complete")
    assert messages and all(group_key.decode() in message for message in messages), messages
    assert not any("RecursionError" in message for message in messages), messages
    assert not redis_client.zrange(app.broker.queues.keys("default").leases, 0, -1)


def test_a_member_that_fails_into_a_group_joining_itself_ends_the_body(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app = make_app("wf")
    seen: List[int] = []

    @app.task(retries=0)
    def boom() -> int:
        raise ValueError("boom")

    @app.task(retries=0)
    def total(values: List[int]) -> None:
        seen.append(sum(values))

    handle = chord([boom.s(), boom.s()], total.s()).delay()
    group_key = [key for key in redis_client.keys("*group*") if b"results" not in key][0]
    redis_client.hset(group_key, "next", pack_data(join_of(**where(group_key)), "x"))
    messages = body_ended(app, seen, handle, "ValueError|the group cannot complete")
    assert len(messages) == 2 and not any("RecursionError" in message
                                          for message in messages), messages


def test_a_chain_of_planted_groups_longer_than_join_depth_ends_the_body(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app, seen, handle, group_key = sent_chord(make_app, redis_client)
    group = where(group_key)
    base = group_key.decode().rsplit(":group:", 1)[0] + ":group:"
    names = [f"planted{index}" for index in range(JOIN_DEPTH + 5)]
    redis_client.hset(group_key, "next", pack_data(join_of(group["q"], names[0]), "x"))
    for name, following in zip(names, names[1:] + [None]):
        redis_client.hset(base + name, mapping={  # type: ignore[arg-type]
            "size": 1, "next": pack_data(None if following is None
                                         else join_of(group["q"], following), "x")})
    messages = body_ended(app, seen, handle, "the group cannot complete")
    assert any(f"more than {JOIN_DEPTH} deep" in message for message in messages), messages
    assert not any("RecursionError" in message for message in messages), messages


def test_a_workflow_walk_that_raises_still_records_the_dead_letter(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever ending a dead task's workflow raises (a RecursionError no bound
    foresaw), its dead letter is recorded and its lease released."""
    app, seen, handle, _ = sent_chord(make_app, redis_client)

    def walk(*args: Any) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(app.broker.workflows, "advance", walk)
    monkeypatch.setattr(app.broker.workflows, "fail", walk)
    worker = app.worker(burst=True)
    for _ in range(5):
        if not worker.run_once():
            break
    letters = app.dead_letters()
    assert len(letters) == 2 and all("RecursionError" in letter.exc_type or "RecursionError"
                                     in letter.message for letter in letters), letters
    assert not redis_client.zrange(app.broker.queues.keys("default").leases, 0, -1)
    assert seen == []


def test_a_workflow_nesting_groups_deeper_than_join_depth_is_refused_at_delay(
        app: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    """What a worker would refuse to carry on is refused at ``delay()``, nothing sent;
    ``JOIN_DEPTH`` groups nested are sent (and carried on: the walk above)."""
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    def nested(depth: int) -> Any:
        workflow: Any = add.s(1, 1)
        for _ in range(depth):
            workflow = group([add.s(2, 2), workflow])
        return workflow

    with pytest.raises(EncodeError, match=f"nest {JOIN_DEPTH + 1} deep, more than the "
                                          f"{JOIN_DEPTH}"):
        nested(JOIN_DEPTH + 1).delay()
    assert fake_redis.dbsize() == 0
    nested(JOIN_DEPTH).delay()
    assert fake_redis.dbsize() > 0
