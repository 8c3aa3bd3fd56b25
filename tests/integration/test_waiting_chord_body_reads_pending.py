"""A workflow's step not sent yet (a chord's body while its members run) is not said
never sent: ``minitask inspect ID`` says it is pending and what it waits for (it said
"unknown to app (never enqueued...)", exit 1). ``status()`` keeps the contract's
words (SPEC 5: one of eight, ``unknown`` while nothing holds the task) and ``get()``
waits for it (SPEC: a chain's last step waits while it is not sent)."""
from __future__ import annotations

import asyncio
import json
from typing import Callable, List

import pytest

from minitask import Minitask, chord
from minitask.cli import inspect
from tests.support.cli import operate_with, run
from tests.support.draining import drain


def test_a_waiting_chord_body_is_pending_then_runs(
        make_app: Callable[..., Minitask], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    app = make_app()

    @app.task(name="add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="total")
    def total(values: List[int], extra: int) -> int:
        return sum(values) + extra

    handle = chord([add.s(1, i) for i in range(2)], total.s(100)).delay()
    assert handle.status() == "unknown"
    assert app.handle(handle.id).status() == "unknown"

    async def asked() -> str:
        try:
            return await app.handle(handle.id).astatus()
        finally:
            await app.aclose()  # this loop's connections

    if request.node.callspec.params["redis_client"] == "real":  # fakeredis has no async
        assert asyncio.run(asked()) == "unknown"
    assert not handle.ready() and not app.handle(handle.id).failed()

    operate_with(app, monkeypatch, inspect)
    code, out = run(capsys, "inspect", "-A", "app", handle.id)
    assert code == 0, out
    assert out.startswith(f"task {handle.id}: pending: the last step of workflow {handle.id}")
    assert "(the other steps now: 2 queued)" in out and "never enqueued" not in out
    code, out = run(capsys, "inspect", "-A", "app", handle.id, "--json")
    assert code == 0 and json.loads(out) == {
        "task_id": handle.id, "status": "pending", "workflow": handle.id, "kind": "chord",
        "waits_for": {"queued": 2}}

    drain(app.worker())
    assert handle.get(timeout=5) == 1 + 2 + 100
    assert app.handle(handle.id).status() == "succeeded"


def test_an_id_never_sent_is_still_unknown(make_app: Callable[..., Minitask],
                                           capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app()

    @app.task(name="add")
    def add(a: int, b: int) -> int:
        return a + b

    chord([add.s(1, 1)], add.s(2)).delay()  # a workflow exists
    assert app.handle("never-sent").status() == "unknown"
    operate_with(app, monkeypatch, inspect)
    code, out = run(capsys, "inspect", "-A", "app", "never-sent")
    assert code == 1 and "unknown to app" in out
