"""``app.worker(queues=...)`` takes a list: a str is refused, naming the argument (before,
``queues="default"`` served seven queues d, e, f, a, u, l, t, registered for good, and
the default queue's tasks never ran), and a queue no task declares is warned about as
``minitask worker -Q`` warns (one warning, shared)."""
from __future__ import annotations

import logging

import pytest

from minitask import ConfigurationError, Minitask


@pytest.mark.parametrize("given", ["default", b"default"])
def test_a_str_of_queues_is_refused_naming_the_argument(app: Minitask, given: object) -> None:
    with pytest.raises(ConfigurationError) as refused:
        app.worker(queues=given)  # type: ignore[arg-type]
    text = str(refused.value)
    assert f"worker(queues={given!r}) takes a list of queue names" in text
    assert f"pass queues=[{given!r}]" in text


def test_a_queue_no_task_declares_is_warned_about(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    @app.task(queue="emails")
    def send() -> None:
        pass

    with caplog.at_level(logging.WARNING, logger="minitask.worker.served"):
        assert app.worker().queues == ["default", "emails"]
        assert app.worker(queues=("emails", "default")).queues == ["emails", "default"]
        assert caplog.records == []
        assert app.worker(queues=["emails", "defualt"]).queues == ["emails", "defualt"]
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    text = record.getMessage()
    assert "queue 'defualt' is the queue of no task of app 'test'" in text
    assert "(its queues: default, emails)" in text and "did you mean 'default'?" in text
