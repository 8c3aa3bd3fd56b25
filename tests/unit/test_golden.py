"""What earlier versions wrote, this one reads: the golden samples in tests/golden/.

Each folder there holds one version's records and Redis layout (tests/golden/
make_golden.py says how they were made). The records must decode to what the
manifest says; the layout, restored on fakeredis and on a real redis-server, must be
served by today's worker and read by today's handles, schedules and dead letters.
A record of a *newer* format must be refused with a reason that says so.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, List

import msgpack
import pytest

from minitask import Minitask
from minitask.broadcast import BroadcastHandle
from minitask.errors import DecodeError
from minitask.periodic import from_record
from minitask.wire.serializer import decode_message, decode_outcome
from minitask.stores.workflow_reads import frame_of
from tests.apps.golden import ECHOED, golden_app
from tests.golden.layout import load
from tests.support.clock import ManualClock

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
VERSIONS = sorted(path.name for path in GOLDEN.iterdir() if (path / "manifest.json").exists())


def manifest(version: str) -> Dict[str, Any]:
    return dict(json.loads((GOLDEN / version / "manifest.json").read_text()))


def record(version: str, name: str) -> bytes:
    return (GOLDEN / version / f"{name}.bin").read_bytes()


def test_there_are_golden_samples_of_this_release() -> None:
    import minitask
    assert minitask.__version__ in VERSIONS, (
        f"tests/golden has no samples of minitask {minitask.__version__}: run "
        f"python -m tests.golden.make_golden when the version changes")


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_messages_decode(version: str) -> None:
    plain = decode_message(record(version, "message-plain"))
    assert (plain.id, plain.task, plain.args, plain.kwargs, plain.queue) == (
        manifest(version)["queued"]["id"], "golden.add", [2, 3], {}, "default")
    assert (plain.priority, plain.attempt, plain.eta_ms, plain.workflow) == (5, 1, None, None)

    nested = decode_message(record(version, "message-nested"))
    assert (nested.task, nested.args, nested.queue, nested.priority) == (
        "golden.echo", [ECHOED], "urgent", 9)

    traced = decode_message(record(version, "message-traced"))
    assert traced.trace == manifest(version)["traced"]["trace"]

    step = decode_message(record(version, "message-workflow"))
    frame = frame_of(step)
    assert step.task == "golden.add" and isinstance(frame, dict) and frame

    call = decode_message(record(version, "broadcast-call"))
    assert (call.id, call.task, call.args, call.queue) == (
        manifest(version)["broadcast"]["id"], "golden.reload", [7], "config")


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_outcomes_and_schedule_record_decode(version: str) -> None:
    done = decode_outcome(record(version, "outcome-succeeded"))
    assert (done.status, done.value, done.attempt) == ("succeeded", 42, 1)
    dead = decode_outcome(record(version, "outcome-dead"))
    expected = manifest(version)["dead"]
    assert (dead.status, dead.exc_type, dead.message) == (
        "failed", expected["exc_type"], expected["message"])
    assert "ValueError: golden failure" in dead.traceback

    schedule = from_record(record(version, "schedule-record"))
    wanted = manifest(version)["schedule"]
    assert (schedule.name, schedule.task, schedule.every, list(schedule.args)) == (
        wanted["name"], wanted["task"], wanted["every"], wanted["args"])


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_layout_is_served_by_this_version(version: str, redis_client: Any) -> None:
    known = manifest(version)
    layout = json.loads((GOLDEN / version / "layout.json").read_text())
    load(redis_client, layout)
    clock = ManualClock(known["now_ms"])
    app: Minitask = golden_app(redis_client, clock)

    assert app.handle(known["done"]["id"]).get(timeout=5) == known["done"]["value"]
    [dead] = [d for d in app.dead_letters(known["dead"]["queue"])
              if d.task_id == known["dead"]["id"]]
    assert (dead.name, dead.exc_type, dead.message) == (
        "golden.fail", known["dead"]["exc_type"], known["dead"]["message"])
    [schedule] = [s for s in app.schedules() if s.name == known["schedule"]["name"]]
    assert (schedule.task, schedule.every) == (known["schedule"]["task"],
                                               known["schedule"]["every"])
    assert [s.name for s in app.subscribers("config")] == [known["broadcast"]["subscriber"]]

    later = app.handle(known["later"]["id"])
    assert later.status() == "scheduled"
    app.worker(queues=["urgent", "default"], burst=True).run()
    app.worker(queues=["urgent", "default"], burst=True).run()  # the chains' next steps
    assert app.handle(known["queued"]["id"]).get(timeout=5) == known["queued"]["value"]
    assert app.handle(known["nested"]["id"]).get(timeout=5) == ECHOED
    assert app.handle(known["chain"]["id"]).get(timeout=5) == known["chain"]["value"]
    assert app.handle(known["chord"]["id"]).get(timeout=5) == known["chord"]["value"]
    assert later.status() == "scheduled"  # not before its time

    clock.advance(known["later"]["delay"] + 1)
    app.worker(queues=["default"], burst=True).run()
    assert later.get(timeout=5) == known["later"]["value"]

    call = BroadcastHandle(app.broker, known["broadcast"]["queue"], known["broadcast"]["id"])
    app.worker(queues=["config"], burst=True, subscriber=known["broadcast"]["subscriber"]).run()
    assert call.join(timeout=5) == {known["broadcast"]["subscriber"]:
                                    known["broadcast"]["value"]}


# -- a newer format is refused, saying so -------------------------------------------

def newer_envelope(version: str) -> bytes:
    fields = msgpack.unpackb(record(version, "message-plain"), raw=False)
    fields["v"] += 1
    fields["a field of the future"] = [1, 2]
    return bytes(msgpack.packb(fields, use_bin_type=True))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_message_or_outcome_of_a_newer_envelope_is_refused_as_written_by_a_newer_minitask(
        version: str) -> None:
    with pytest.raises(DecodeError, match="written by a newer minitask"):
        decode_message(newer_envelope(version))
    fields = msgpack.unpackb(record(version, "outcome-succeeded"), raw=False)
    fields["v"] += 1
    with pytest.raises(DecodeError, match="written by a newer minitask"):
        decode_outcome(msgpack.packb(fields, use_bin_type=True))


def test_an_older_or_malformed_envelope_is_not_called_newer() -> None:
    for version in (0, "2", None):
        body = msgpack.packb({"v": version, "id": "x"}, use_bin_type=True)
        with pytest.raises(DecodeError, match="unknown envelope version") as caught:
            decode_message(body)
        assert "newer" not in str(caught.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_newer_schedule_record_or_workflow_frame_is_refused_as_written_by_a_newer_minitask(
        version: str) -> None:
    head, _, body = record(version, "schedule-record").partition(b"\n")
    timing = json.loads(head)
    timing["v"] += 1
    with pytest.raises(DecodeError, match="written by a newer minitask"):
        from_record(json.dumps(timing).encode() + b"\n" + body)

    step = decode_message(record(version, "message-workflow"))
    assert step.workflow is not None
    frame = msgpack.unpackb(step.workflow, raw=False)
    frame["v"] += 1
    newer = dataclasses.replace(step, workflow=msgpack.packb(frame, use_bin_type=True))
    with pytest.raises(DecodeError, match="written by a newer minitask"):
        frame_of(newer)


def test_the_manifests_name_every_record_they_rely_on() -> None:
    for version in VERSIONS:
        names: List[str] = sorted(path.stem for path in (GOLDEN / version).glob("*.bin"))
        assert names == sorted(["broadcast-call", "message-nested", "message-plain",
                                "message-traced", "message-workflow", "outcome-dead",
                                "outcome-succeeded", "schedule-record"]), version
