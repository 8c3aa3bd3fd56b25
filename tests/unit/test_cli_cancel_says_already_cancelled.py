"""``minitask cancel`` of a task cancelled before says so and exits 1, as for any
cancel that changed nothing (``handle.cancel()`` returns False); it once printed
"ID: cancelled" and exited 0."""
from __future__ import annotations

import json

import pytest

from minitask import Minitask
from minitask.cli import cancel as cancel_command
from tests.support.cli import operate_with, run


@pytest.fixture
def operated(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> Minitask:
    return operate_with(app, monkeypatch, cancel_command)


def test_a_task_cancelled_before_is_not_reported_cancelled_again(
        operated: Minitask, capsys: pytest.CaptureFixture[str]) -> None:
    @operated.task
    def add(a: int, b: int) -> int:
        return a + b

    first, second = add.delay(1, 1), add.delay(2, 2)
    assert first.cancel() is True
    assert first.cancel() is False  # what the handle says of a second cancel

    code, out = run(capsys, "cancel", "-A", "test", first.id)
    assert (code, out) == (1, f"{first.id}: not cancelled, it was already cancelled\n")

    code, out = run(capsys, "cancel", "-A", "test", second.id, first.id)
    assert code == 1
    assert out.splitlines() == [f"{second.id}: cancelled",
                                f"{first.id}: not cancelled, it was already cancelled"]

    code, out = run(capsys, "cancel", "-A", "test", "--json", first.id)
    assert (code, json.loads(out)) == (1, {first.id: "already cancelled"})
    code, out = run(capsys, "cancel", "-A", "test", "--running", first.id)
    assert (code, out) == (1, f"{first.id}: not cancelled, it was already cancelled\n")
    assert (first.status(), second.status()) == ("cancelled", "cancelled")
