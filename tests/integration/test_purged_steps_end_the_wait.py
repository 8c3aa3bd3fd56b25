"""A chain or chord whose earlier steps were purged (``minitask purge``) before they
ran can never finish: purge removes a message and leaves no outcome, so nothing sends
the steps that follow. ``get(timeout=None)`` of a later step waited for ever (its
marker says not sent, so it was taken for one still to be sent), and ``minitask
inspect workflow`` drew the purged steps and those after them ``pending``. Now
``get()`` and ``aget()`` raise ``ResultTimeout`` at once, saying an earlier step was
purged or is gone, and the steps read ``gone``. A later step whose senders are still
queued (nothing purged) is waited for as before."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from minitask import Minitask, ResultTimeout, chain, chord
from minitask.admin import purge_ready
from minitask.admin.workflows import workflow
from tests.support.lost_steps import aget, ended_at_once, raised_unbounded

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180),
              pytest.mark.app("purgedsteps", on="server")]

LONG = 20.0


def tasks(app: Minitask) -> Dict[str, Any]:
    @app.task(name="purged.add")
    def add(x: int, y: int = 0) -> int:
        return x + y

    @app.task(name="purged.total")
    def total(values: Any) -> int:
        return sum(values)

    return {"add": add, "total": total}


def says_purged(said: str, handle: Any) -> None:
    assert f"task {handle.id} is a step of workflow " in said, said
    assert "will never be sent: an earlier step was purged from its queue" in said, said
    assert "unless it was purged" not in said, said


WORKFLOWS = {
    "chain": lambda add, total: chain(add.s(1, 1), add.s(10)),
    "longer chain": lambda add, total: chain(add.s(1, 1), add.s(10), add.s(100)),
    "chord": lambda add, total: chord([add.s(i, 1) for i in range(3)], total.s()),
}


@pytest.mark.parametrize("kind", sorted(WORKFLOWS))
def test_a_workflow_whose_steps_were_purged_ends_get_and_aget_at_once(
        app: Minitask, kind: str) -> None:
    named = tasks(app)
    handle = WORKFLOWS[kind](named["add"], named["total"]).delay()
    assert purge_ready(app, "default") >= 1
    while app.worker(burst=True).run_once():  # nothing to run: all purged
        pass
    said = ended_at_once(lambda: handle.get(timeout=LONG))
    says_purged(said, handle)
    says_purged(raised_unbounded(handle.get), handle)
    said = ended_at_once(lambda: aget(app, handle, LONG))
    says_purged(said, handle)
    with pytest.raises(ResultTimeout) as caught:
        aget(app, handle, None)
    says_purged(str(caught.value), handle)
    found = workflow(app, getattr(handle, "workflow_id", None) or handle.id)
    assert found is not None
    assert set(found["counts"]) == {"gone"}, found["counts"]


def test_a_chord_with_one_member_purged_is_gone_once_the_others_ended(
        app: Minitask) -> None:
    named = tasks(app)
    handle = chord([named["add"].s(i, 1) for i in range(3)], named["total"].s()).delay()
    assert app.worker(burst=True).run_once()  # one member ran
    assert purge_ready(app, "default") == 2
    said = ended_at_once(lambda: handle.get(timeout=LONG))
    says_purged(said, handle)
    found = workflow(app, getattr(handle, "workflow_id", None) or handle.id)
    assert found is not None and found["counts"] == {"succeeded": 1, "gone": 3}, found


def test_a_later_step_whose_senders_are_queued_is_still_waited_for(app: Minitask) -> None:
    named = tasks(app)
    handle = chain(named["add"].s(1, 1), named["add"].s(10), named["add"].s(100)).delay()
    with pytest.raises(ResultTimeout) as caught:
        handle.get(timeout=0.5)
    assert "will never be sent" not in str(caught.value)
    found = workflow(app, getattr(handle, "workflow_id", None) or handle.id)
    assert found is not None and "gone" not in found["counts"], found
    while app.worker(burst=True).run_once():
        pass
    assert handle.get(timeout=30) == 112
