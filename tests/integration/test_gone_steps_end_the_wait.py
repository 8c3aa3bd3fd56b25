"""``get()`` on a group (and ``get()``/``aget()`` on a workflow step) whose task ran and
is gone since (its result expired, ``result_ttl``, or another process forgot it) raises
``ResultTimeout`` at once, naming the task and saying so; it waited out its whole
timeout (for ever with ``timeout=None``), as for a step not sent yet. A step not sent
yet is still waited for. Real TTLs on the suite's own redis-server; an in-process
worker runs the tasks (``burst``)."""
from __future__ import annotations

from typing import Any, Dict, Iterable

import pytest

from minitask import GroupHandle, Minitask, chain, chord, group
from minitask.broker.keys import queue_keys
from tests.support.lost_steps import aget, ended_at_once, raised, raised_unbounded
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180),
              pytest.mark.app("gonesteps", on="server")]

#: The keys of the app's default queue.
KEYS = queue_keys("gonesteps", "default")

#: The timeout given to a wait that must end at once (before: it waited this long).
LONG = 20.0


def tasks(app: Minitask) -> Dict[str, Any]:
    @app.task(name="gone.keep", result_ttl=600)
    def keep(x: int = 0) -> int:
        return x

    @app.task(name="gone.short", result_ttl=1)
    def short(x: int = 0) -> int:
        return x + 1

    return {"keep": keep, "short": short}


def run_all(app: Minitask) -> None:
    while app.worker(burst=True).run_once():
        pass


def expired(app: Minitask, task_ids: Iterable[str]) -> None:
    """Wait (bounded) until the results of ``task_ids`` expired."""
    client = app.broker.client
    for task_id in task_ids:
        wait_until(lambda: not client.exists(KEYS.result(task_id)), 30,
                   message=f"the result of {task_id} to expire (result_ttl 1 s)")


def says_gone(said: str, task_id: str, name: str = "gone.short") -> None:
    assert f"task {task_id} is unknown" in said, said
    assert f"task {name!r} was sent" in said, said
    assert "expired (result_ttl) or was forgotten" in said, said


def test_a_groups_expired_member_ends_its_get_at_once(app: Minitask) -> None:
    short = tasks(app)["short"]
    handle = group(short.s(index) for index in range(3)).delay()
    run_all(app)
    assert handle.get(timeout=30) == [1, 2, 3]
    expired(app, [member.id for member in handle.handles])
    first = handle.handles[0]
    said = ended_at_once(lambda: handle.get(timeout=LONG))
    assert said.startswith(f"group {handle.id} can never finish: its task 1 of 3 "), said
    says_gone(said, first.id)
    says_gone(raised_unbounded(handle.get), first.id)
    says_gone(raised_unbounded(first.get), first.id)
    said = ended_at_once(lambda: aget(app, first, LONG))
    says_gone(said, first.id)


@pytest.mark.parametrize("kind", ["chain", "chord", "group after a step"])
def test_a_later_step_that_expired_ends_get_and_aget_at_once(app: Minitask,
                                                             kind: str) -> None:
    """A later step (sent once the steps before it end) whose result expired, its marker
    still there (the workflow's longest result_ttl): it was sent, so it is gone."""
    named = tasks(app)
    keep, short = named["keep"], named["short"]
    workflow = {"chain": lambda: chain(keep.s(1), short.s()),
                "chord": lambda: chord([keep.s(1), keep.s(2)], short.si(0)),
                "group after a step": lambda: chain(keep.s(1), group(short.s(), keep.s()))}
    handle = workflow[kind]().delay()
    run_all(app)
    step = handle.handles[0] if isinstance(handle, GroupHandle) else handle
    assert step.get(timeout=30) in (1, 2)
    expired(app, [step.id])
    said = ended_at_once(lambda: handle.get(timeout=LONG))
    says_gone(said, step.id)
    said = ended_at_once(lambda: aget(app, step, LONG))
    says_gone(said, step.id)
    says_gone(raised_unbounded(step.get), step.id)
    if not isinstance(handle, GroupHandle):  # rebuilt in another process: the same
        said = ended_at_once(lambda: app.handle(handle.id).get(timeout=LONG))
        assert f"task {handle.id} is unknown" in said, said
        assert "expired (result_ttl) or was forgotten" in said, said


def test_a_member_forgotten_by_another_process_ends_get_at_once(app: Minitask) -> None:
    named = tasks(app)
    keep = named["keep"]
    handle = chain(keep.s(1), group(keep.s(), keep.s(), keep.s())).delay()
    assert isinstance(handle, GroupHandle)
    run_all(app)
    assert handle.get(timeout=30) == [1, 1, 1]
    forgotten = handle.handles[1]
    assert app.handle(forgotten.id).forget()  # another handle: another process's
    said = ended_at_once(lambda: handle.get(timeout=LONG))
    assert said.startswith(f"group {handle.id} can never finish: its task 2 of 3 "), said
    says_gone(said, forgotten.id, "gone.keep")
    says_gone(raised_unbounded(handle.get), forgotten.id, "gone.keep")
    said = ended_at_once(lambda: aget(app, forgotten, LONG))
    says_gone(said, forgotten.id, "gone.keep")
    rebuilt = app.group_handle(handle.id)  # rebuilt: the task's name is not known there
    said = ended_at_once(lambda: rebuilt.get(timeout=LONG))
    assert f"task {forgotten.id} is unknown" in said and "it was sent" in said, said


def test_a_first_task_forgotten_elsewhere_ends_a_groups_get(app: Minitask) -> None:
    keep = tasks(app)["keep"]
    handle = group(keep.s(index) for index in range(4)).delay()
    run_all(app)
    assert handle.get(timeout=30) == [0, 1, 2, 3]
    assert app.handle(handle.handles[2].id).forget()
    said = ended_at_once(lambda: handle.get(timeout=LONG))
    says_gone(said, handle.handles[2].id, "gone.keep")


@pytest.mark.parametrize("kind", ["chain", "group after a step", "reserved id"])
def test_a_step_not_sent_yet_is_still_waited_for(app: Minitask, kind: str) -> None:
    """No worker runs: the later steps are not sent; each wait runs its whole timeout,
    and says the step is not sent yet; sent and run, its value comes."""
    named = tasks(app)
    keep = named["keep"]
    workflow = {"chain": lambda: chain(keep.s(1), keep.s()),
                "group after a step": lambda: chain(keep.s(1), group(keep.s(), keep.s())),
                "reserved id": lambda: chain(keep.s(1), keep.s().set(task_id="gone-later"))}
    handle = workflow[kind]().delay()
    step = handle.handles[0] if isinstance(handle, GroupHandle) else handle
    assert not app.broker.client.hexists(KEYS.once(step.id), "state")  # not sent
    for wait in (lambda: handle.get(timeout=1.0),
                 lambda: aget(app, step, 1.0),
                 lambda: step.get(timeout=1.0)):
        took, said = raised(wait)
        assert took >= 1.0, (took, said)
        assert "did not finish within 1.0 s" in said, said
    assert "it is not sent yet" in said, said
    run_all(app)
    assert handle.get(timeout=30) in (1, [1, 1])
