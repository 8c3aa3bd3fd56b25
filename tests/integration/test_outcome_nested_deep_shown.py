"""An outcome planted in Redis whose ``value`` or ``extra`` is nested a thousand
levels deep, on a real redis-server (issue 29, probe 18): ``minitask inspect --id``
(text and ``--json``) and the dashboard's task page and API show the task, the value
as a bounded ``repr`` with a note saying it is nested too deep to show whole
(``handle.get()`` still returns it as stored), rather
than failing with RecursionError (exit 4, a 500)."""
from __future__ import annotations

import json
import time
from typing import Any, Dict

import msgpack  # type: ignore[import-untyped]
import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.dashboard.web import Dashboard
from tests.apps.foreign import build
from tests.integration.test_foreign_scores_shown import app, cli  # noqa: F401  # fixture
from tests.support.pages import get

# (the fixture imported adds the queue "other" to the app this mark builds)
pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
KEYS = queue_keys("foreign", "other")
DEEP = b"\x91" * 1000 + b"\x90"  # [[[...[]...]]], a thousand levels
DEEP_MAP = b"\x81\xa1k" * 1000 + b"\x80"  # {"k": {"k": ... {}}}


def _outcome(value: bytes, extra: bytes, status: str = "succeeded") -> bytes:
    """An outcome as minitask packs one, but with ``value`` and ``extra`` as given."""
    fields: Dict[str, Any] = {"v": 1, "status": status,
                              "finished_at_ms": int(time.time() * 1000), "exc_type": "",
                              "message": "", "traceback": "", "reason": "", "attempt": 1}
    packed = b"".join(msgpack.packb(key) + msgpack.packb(item) for key, item in fields.items())
    return (bytes([0x80 | len(fields) + 2]) + packed + msgpack.packb("value") + value
            + msgpack.packb("extra") + extra)


PLANTS = {
    "value a deep array": (DEEP, b"\x80"),
    "value a deep map": (DEEP_MAP, b"\x80"),
    "extra holding a deep array": (b"\x01", b"\x81\xaefailed_task_id" + DEEP),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_result_nested_deep_is_shown_bounded(
        app: Minitask, admin: "redis.Redis[bytes]",  # noqa: F811 (the fixture imported)
        plant: str) -> None:
    task_id = "deep0000000000000000001"
    admin.rpush(KEYS.result(task_id), _outcome(*PLANTS[plant]))
    code, said = cli("inspect", "-A", APP, "--id", task_id)
    assert code == 0, said
    assert "succeeded" in said and len(said) < 5_000, said
    code, said = cli("inspect", "-A", APP, "--id", task_id, "--json")
    assert code == 0, said
    shown = json.loads(said)
    assert shown["status"] == "succeeded" and len(said) < 5_000, said
    dashboard = Dashboard(app)
    for path in (f"/task/{task_id}", f"/api/task/{task_id}"):
        status, page = get(dashboard, path)
        assert status.startswith("200"), (path, status, page[-500:])
        assert len(page) < 50_000, path
    if plant.startswith("value"):
        assert "nested more than 512 levels deep" in shown["note"], shown
        assert shown["value"].startswith("[") or shown["value"].startswith("{"), shown


def test_a_retry_note_and_a_dead_letter_nested_deep_are_shown_bounded(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:  # noqa: F811 (imported)
    retrying = app.tasks["mark"].apply_in(600, "r")
    dead = app.tasks["mark"].apply_in(600, "d")
    admin.hset(KEYS.retrying, retrying.id, _outcome(DEEP, b"\x81\xa1x" + DEEP, "failed"))
    admin.hset(KEYS.dead_info, dead.id, _outcome(DEEP, b"\x81\xa1x" + DEEP, "dead"))
    dashboard = Dashboard(app)
    for task_id in (retrying.id, dead.id):
        for json_flag in ((), ("--json",)):
            code, said = cli("inspect", "-A", APP, "--id", task_id, *json_flag)
            assert code == 0, said
            assert "RecursionError" not in said and len(said) < 5_000, said
        for path in (f"/task/{task_id}", f"/api/task/{task_id}"):
            status, page = get(dashboard, path)
            assert status.startswith("200"), (path, status, page[-500:])
