"""Workflow and schedule state that minitask did not write: a member of a corrupt
group is dead-lettered naming the key (never retried for ever), and a fire that
meets a key of another type writes nothing. Also the shared escape function."""
from __future__ import annotations

import dataclasses
from typing import Callable, List

import pytest
import redis

from minitask import Minitask, TaskFailed, chain, chord
from minitask.broker.keys import queue_keys
from minitask.printable import printable
from minitask.wire.serializer import decode_message, encode_message, pack_data, unpack_data
from tests.support.chords import sent_chord
from tests.support.clock import ManualClock

#: what a worker does per run_once; the drain below stops after this many
LIMIT = 20


def _drain(worker: object) -> int:
    ran = 0
    while worker.run_once():  # type: ignore[attr-defined]
        ran += 1
        assert ran <= LIMIT, "a task was retried over and over"
    return ran


@pytest.mark.parametrize("damage", ["size", "type", "deleted"])
def test_a_member_of_a_corrupt_group_is_dead_lettered_naming_the_key(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        damage: str) -> None:
    app, seen, handle, group_key = sent_chord(make_app, redis_client)
    if damage == "size":
        redis_client.hset(group_key, "size", "abc")
    else:
        redis_client.delete(group_key)
        if damage == "type":
            redis_client.rpush(group_key, "not a group")
    _drain(app.worker(burst=True))
    if damage != "deleted":  # a deleted group is no data that is not minitask's
        dead = app.dead_letters()
        assert dead and all(group_key.decode() in letter.message for letter in dead)
        assert redis_client.type(group_key) == (b"hash" if damage == "size" else b"list")
    assert seen == []
    # the body ends, naming the group, whether what follows could be read from the
    # group (size) or only from the members' frames (type, deleted: it stayed
    # "unknown" for ever, and get() without a timeout never returned)
    assert handle.status() == "cancelled"
    with pytest.raises(TaskFailed, match=f"{group_key.decode()}.*the group cannot complete"
                       if damage != "size" else "the group cannot complete"):
        handle.get(timeout=0)


@pytest.mark.parametrize("damage", ["fired", "results type", "result"])
def test_a_chord_body_ends_when_its_group_can_never_complete(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        damage: str) -> None:
    """A fired mark that is not 1, a results key of another type, a result no minitask
    packed: the body stayed unknown for ever (the fired mark with not a word logged),
    though what follows the group could be read and ended."""
    app, seen, handle, group_key = sent_chord(make_app, redis_client)
    if damage == "fired":
        redis_client.hset(group_key, "fired", "x")
    elif damage == "results type":
        redis_client.rpush(group_key + b":results", "not results")
    else:
        redis_client.hset(group_key + b":results", "0", b"\xc1 not packed")
    _drain(app.worker(burst=True))
    assert seen == []
    assert handle.status() == "cancelled"
    with pytest.raises(TaskFailed, match="the group cannot complete"):
        handle.get(timeout=0)
    dead = app.dead_letters()
    assert dead and all(group_key.decode().rsplit(":", 1)[-1] in letter.message
                        for letter in dead)


def test_a_step_marker_no_minitask_wrote_is_named_not_taken_for_sent(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    """A marker whose state is neither "sent" nor "cancelled" was read as "sent": the
    step was never sent and nothing was said. Now the step before it is dead-lettered
    naming the key, as for a marker of another type."""
    app = make_app("wf")

    @app.task(retries=0)
    def add(x: int, y: int) -> int:
        return x + y

    handle = chain(add.s(1, 1), add.s(2).set(task_id="second")).delay()
    marker = queue_keys("wf", "default").once("second")
    redis_client.hset(marker, "state", b"\xff planted")
    _drain(app.worker(burst=True))
    [dead] = app.dead_letters()
    assert marker in dead.message and "no step marker minitask wrote" in dead.message
    assert redis_client.hget(marker, "state") == b"\xff planted"  # left as it was
    # the step it names ends too (it stayed "unknown" for ever: get() never returned)
    assert handle.status() == "cancelled"
    with pytest.raises(TaskFailed, match=marker):
        handle.get(timeout=0)


def test_a_step_whose_marker_is_of_another_type_ends_cancelled_naming_the_key(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    """A marker of another type: the step before it was dead-lettered naming the key,
    and the step itself stayed "unknown" for ever."""
    app = make_app("wf")

    @app.task(retries=0)
    def add(x: int, y: int) -> int:
        return x + y

    handle = chain(add.s(1, 1), add.s(2).set(task_id="second"),
                   add.s(3).set(task_id="third")).delay()
    marker = queue_keys("wf", "default").once("second")
    redis_client.delete(marker)  # its reservation (stores/step_ids.py) replaced
    redis_client.rpush(marker, "planted")
    _drain(app.worker(burst=True))
    [dead] = app.dead_letters()
    assert marker in dead.message
    assert redis_client.lrange(marker, 0, -1) == [b"planted"]  # left as it was
    assert app.handle("second").status() == "cancelled"
    with pytest.raises(TaskFailed, match=marker):
        handle.get(timeout=0)


def test_a_result_past_the_group_size_neither_completes_the_group_nor_fails_it(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    """A planted field "7" counted as a member's result: the group completed at its
    first member, with the second's result missing (that member was dead-lettered)."""
    app = make_app("wf")

    @app.task(retries=0)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(retries=0)
    def total(values: List[int]) -> int:
        return sum(values)

    handle = chord([add.s(1, 1), add.s(2, 2)], total.s()).delay()
    group_key = [key for key in redis_client.keys("*group*") if b"results" not in key][0]
    redis_client.hset(group_key + b":results", "7", b"\xc1 not packed")
    _drain(app.worker(burst=True))
    assert handle.get(timeout=0) == 6
    assert app.dead_letters() == []


def test_a_fire_that_meets_a_fired_key_of_another_type_moves_it_aside_and_runs(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        clock: ManualClock) -> None:
    """A fired hash of another type held back every schedule of its queue until someone
    renamed it (probe29r L4): it is moved aside whole, kept, and the tick fires."""
    app = make_app("sched")

    @app.task(queue="timed")
    def beat() -> None:
        pass

    app.add_schedule("often", beat, every=1.0)
    k = queue_keys("sched", "timed")
    redis_client.delete(k.fired)
    redis_client.rpush(k.fired, "someone's")
    clock.advance(5.0)
    worker = app.worker(burst=True, queues=["timed"])
    worker.run_once()  # fires what is due, then serves the queue: must not raise
    assert redis_client.lrange(k.fired + ":foreign", 0, -1) == [b"someone's"]
    assert redis_client.hget(k.fired, "id:often") is not None


def test_printable_escapes_control_characters_and_bytes_that_are_not_utf8() -> None:
    assert printable("plain name é") == "plain name é"
    assert printable(b"a\xff\x1b[2J") == "a\\xff\\x1b[2J"
    assert printable("forged\nERROR line") == "forged\\x0aERROR line"
    assert printable("rtl\u202etxt") == "rtl\\u202etxt"
    assert printable("kept\nlines\x07", keep_newlines=True) == "kept\nlines\\x07"


def test_a_schedule_record_whose_period_is_no_whole_number_of_ms_is_refused() -> None:
    """A planted ``every_ms`` of 1.5 fired a run every 2 ms on every worker."""
    from minitask.errors import DecodeError
    from minitask.periodic import build, from_record

    record = build("often", "t", lambda: None, every=60.0, queue="default", priority=5,
                   max_message_bytes=1 << 20).record()
    head, _, body = record.partition(b"\n")
    planted = head.replace(b'"every_ms":60000', b'"every_ms":1.5') + b"\n" + body
    assert planted != record
    with pytest.raises(DecodeError, match="every_ms 1.5 is no whole number"):
        from_record(planted)
    assert from_record(record).every == 60.0


def test_a_planted_schedule_whose_name_holds_a_control_character_is_left_out(
        make_app: Callable[..., Minitask]) -> None:
    """It made a run at every tick whose id the worker refused: a dead letter a tick."""
    from tests.support.draining import drain
    app = make_app("named")

    @app.periodic(every=60.0, name="fine")
    def fine() -> None:
        pass

    worker = app.worker(burst=True)
    worker.starting()
    keys = queue_keys("named", "default")
    client = app.broker.client
    record = client.hget(keys.schedules, "fine")
    client.hset(keys.schedules, "esc\x1b[31mred", record)
    client.zadd(keys.ticks, {"esc\x1b[31mred": 0})  # due at once, for ever
    assert [e.name for e in app.broker.schedules.armed(["default"])["default"]] == ["fine"]
    drain(app.worker(burst=True))
    assert app.dead_letters() == []


def test_a_member_frame_of_an_older_minitask_still_reads_as_before(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    """Frames written before members named what follows their group (no ``"a"``): the
    members still run; with the group's state gone, that is logged, as before."""
    app = make_app("wf")

    @app.task(retries=0)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(retries=0)
    def total(values: List[int]) -> int:
        return sum(values)

    handle = chord([add.s(1, 1), add.s(2, 2)], total.s()).delay()
    k = queue_keys("wf", "default")
    for task_id, body in redis_client.hgetall(k.messages).items():
        message = decode_message(body)
        frame = unpack_data(message.workflow, "a frame")
        assert "a" in frame["next"]
        del frame["next"]["a"]
        older = dataclasses.replace(message, workflow=pack_data(frame, "a frame"))
        redis_client.hset(k.messages, task_id, encode_message(older))
    [group_key] = [key for key in redis_client.keys("*group*") if b"results" not in key]
    redis_client.delete(group_key)
    _drain(app.worker(burst=True))
    assert app.dead_letters() == []
    assert handle.status() == "unknown"
    assert "what follows it cannot be read either" in caplog.text
