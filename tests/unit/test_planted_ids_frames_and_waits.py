"""What a worker and a handle read of planted or pending data (issue 29, probe 15).

* Decoding refuses a message whose id is longer than any producer sends
  (``MAX_ID_BYTES``), as it refuses other bad id fields, and says so in a few
  hundred characters however long the id is.
* ``frame_of`` refuses a workflow frame of the right version that no minitask writes
  (no ``max``, a ``next`` that is no step), naming the field: a worker reads it before
  the task runs.
* ``get(timeout=...)`` of a workflow step not sent yet (a chord's body, a chain's
  last step, their earlier steps merely queued) says it waits for those steps,
  not that it is "unknown (cancelled and expired, or purged)"; its status() stays
  one of SPEC's words.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict

import msgpack  # type: ignore[import-untyped]
import pytest

from minitask import Minitask, ResultTimeout, chain, chord
from minitask.errors import DecodeError
from minitask.stores.workflow_reads import frame_of
from minitask.wire.message import MAX_ID_BYTES, STATUSES, Message
from minitask.wire.serializer import decode_message
from tests.support.envelopes import body

#: The longest a refusal of a planted id may be, however long the id.
REFUSAL_MOST = 1000


@pytest.mark.parametrize("task_id", ["L" * (MAX_ID_BYTES + 1), "é" * (MAX_ID_BYTES // 2 + 1),
                                     "L" * 2_000_000], ids=["ascii", "utf8", "2MB"])
def test_an_id_longer_than_any_producer_sends_is_refused_naming_the_field(
        task_id: str) -> None:
    with pytest.raises(DecodeError) as refused:
        decode_message(body(id=task_id))
    text = str(refused.value)
    assert "field 'id'" in text
    assert f"over the {MAX_ID_BYTES} an id may hold" in text
    assert len(text) < REFUSAL_MOST


@pytest.mark.parametrize("task_id", ["L" * MAX_ID_BYTES, "é" * (MAX_ID_BYTES // 2)],
                         ids=["ascii", "utf8"])
def test_an_id_of_max_id_bytes_still_decodes(task_id: str) -> None:
    assert decode_message(body(id=task_id)).id == task_id


def _step(frame: Any) -> Message:
    message = decode_message(body(id="step-1"))
    return dataclasses.replace(message, workflow=msgpack.packb(frame, use_bin_type=True))


@pytest.mark.parametrize("frame, field", [
    ({"v": 1, "next": [1, 2]}, "field 'max' is missing"),
    ({"v": 1, "next": None, "max": "big"}, "field 'max' is 'big'"),
    ({"v": 1, "next": None, "max": 0}, "field 'max' is 0"),
    ({"v": 1, "next": [1, 2], "max": 1000}, "field 'next'"),
    ({"v": 1, "next": {"k": "then", "node": "x"}, "max": 1000}, "field 'next'"),
    ({"v": 1, "next": {"k": "join", "q": "a", "id": "g"}, "max": 1000}, "field 'next'"),
    ({"v": 1, "next": None, "err": "x", "max": 1000}, "field 'err'"),
    ({"v": 1, "next": None, "err": [1], "max": 1000}, "field 'err'"),
], ids=lambda v: repr(v)[:40])
def test_a_frame_no_minitask_writes_is_refused_naming_the_field(
        frame: Dict[str, Any], field: str) -> None:
    with pytest.raises(DecodeError) as refused:
        frame_of(_step(frame))
    assert "workflow frame (field 'wf')" in str(refused.value)
    assert field in str(refused.value)


def test_the_frames_minitask_writes_are_read() -> None:
    join = {"k": "join", "q": "a", "id": "g1", "i": 0, "ttl": 1000, "a": {"t": [], "j": None}}
    step = {"k": "t", "id": "t2", "task": "add", "q": "a", "p": 0, "ttl": 1000, "args": [1],
            "kwargs": {}, "imm": False, "err": [], "delay": None, "eta": None}
    then = {"k": "then", "node": step, "next": join}
    for frame in ({"v": 1, "next": None, "err": [step], "max": 1000},
                  {"v": 1, "next": then, "err": [], "max": 1000, "w": "wid"},
                  {"v": 1, "next": join, "err": None, "max": 1}):
        assert frame_of(_step(frame)) == frame


def test_a_step_not_sent_yet_times_out_saying_it_waits_for_the_steps_before_it(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("waits")

    @app.task(name="add", queue="nobody")
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="total", queue="nobody")
    def total(values: Any) -> int:
        return sum(values)

    for handle in (chord([add.s(1, 1), add.s(2, 2)], total.s()).delay(),
                   chain(add.s(1, 1), add.s(5)).delay()):
        assert handle.status() == "unknown" and handle.status() in STATUSES
        with pytest.raises(ResultTimeout) as waited:
            handle.get(timeout=0.05)
        text = str(waited.value)
        assert "not sent yet" in text and "sent once the steps before it end" in text, text
        assert "cancelled and expired" not in text
