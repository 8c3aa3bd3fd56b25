"""Options checked before anything is sent (probe M7, L3): a periodic task refuses the
fair-queue options its runs could not hold (a tick is sent without a group), and a
chosen task_id (200 bytes) and a limit_key (200 characters) have a size cap, as group
names have; each error names the task or schedule and the problem."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from minitask import ConfigurationError, Minitask


@pytest.mark.parametrize("options", [
    {"group_by": "tenant", "group_max_running": 1},
    {"group_by": "tenant"},
    {"group_max_running": 1},
    {"group_rate_limit": "5/s"},
])
def test_a_periodic_task_refuses_group_options(
        app: Minitask, options: Dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as refused:
        @app.periodic(every=1.0, args=("acme",), name="tick", **options)
        def tick(tenant: str) -> None:
            pass
    message = str(refused.value)
    assert "'tick'" in message and "periodic" in message
    assert all(name in message for name in options)
    assert "tick" not in app.tasks and "tick" not in app.periodic_schedules


def test_add_schedule_refuses_a_grouped_task(app: Minitask) -> None:

    @app.task(group_by="tenant", group_max_running=1, name="grouped")
    def grouped(tenant: str) -> None:
        pass

    with pytest.raises(ConfigurationError, match="schedule 'nightly': task 'grouped' sets "
                                                 "group_by, group_max_running"):
        app.add_schedule("nightly", grouped, every=60, args=("acme",))
    assert app.schedules() == []


def test_a_periodic_task_without_group_options_is_still_taken(app: Minitask) -> None:

    @app.periodic(every=1.0, args=("acme",), name="plain", max_running=1)
    def plain(tenant: str) -> None:
        pass

    assert "plain" in app.periodic_schedules


def test_a_task_id_longer_than_200_bytes_is_refused(app: Minitask) -> None:

    @app.task(name="job")
    def job(n: int) -> None:
        pass

    with pytest.raises(ConfigurationError) as refused:
        job.apply_async((1,), task_id="x" * 100_000)
    assert "'job'" in str(refused.value) and "task_id" in str(refused.value)
    assert "100,000 bytes" in str(refused.value) and "200" in str(refused.value)
    with pytest.raises(ConfigurationError, match="task_id"):
        job.apply_async((1,), task_id="é" * 101)  # 202 bytes in UTF-8
    with pytest.raises(ConfigurationError, match="task_id"):
        job.s(1).set(task_id="y" * 201)
    assert job.apply_async((1,), task_id="z" * 200).id == "z" * 200
    assert app.broker.queues.counts("default")["ready"] == 1


def test_a_limit_key_longer_than_200_characters_is_refused(app: Minitask) -> None:

    @app.task(name="limited", rate_limit="5/s")
    def limited(n: int) -> None:
        pass

    with pytest.raises(ConfigurationError) as refused:
        limited.apply_async((1,), limit_key="k" * 100_000)
    assert "'limited'" in str(refused.value) and "limit_key" in str(refused.value)
    assert "100,000 characters" in str(refused.value)
    limited.apply_async((1,), limit_key="k" * 200)
    assert app.broker.queues.counts("default")["ready"] == 1
