"""``join(subscribers=[...])`` refuses a name the call was never sent to: it would
wait for ever (with no timeout) for a run that cannot happen. Names it was sent to
are waited for as before."""
from __future__ import annotations

from typing import Any

import pytest

from minitask import ConfigurationError, Minitask
from tests.support.draining import drain

QUEUE = "config"


def test_a_name_that_never_got_the_call_is_refused_at_once(app: Minitask) -> None:
    @app.task(broadcast=True, queue=QUEUE)
    def reload(version: int) -> int:
        return version

    a = app.worker(queues=[QUEUE], subscriber="a")
    a.starting()
    handle = reload.delay(3)
    with pytest.raises(ConfigurationError, match=r"'ghost' never got this call \(it went "
                                                 r"to 'a'\)"):
        handle.join(subscribers=["ghost"])  # no timeout: this waited for ever
    with pytest.raises(ConfigurationError, match="'ghost' never got this call"):
        handle.join(timeout=5, subscribers=["a", "ghost"])
    drain(a)
    assert handle.join(timeout=1, subscribers=["a"]) == {"a": 3}


@pytest.mark.parametrize("planted", ["abc", "-1", "1", "0"])
def test_a_sequence_no_minitask_wrote_never_loses_the_next_call(
        app: Minitask, fake_redis: Any, planted: str) -> None:
    """A sequence of "abc" started again at 1, behind every cursor: the next call was
    taken for one each subscriber had pulled, and never ran; a sequence set back below
    the cursors ("1", "0") lost the next calls the same way."""
    from minitask.broker.keys import queue_keys

    @app.task(broadcast=True, queue=QUEUE)
    def reload(version: int) -> int:
        return version

    a = app.worker(queues=[QUEUE], subscriber="a")
    a.starting()
    for version in (1, 2, 3):
        reload.delay(version)
        drain(a)
    fake_redis.hset(queue_keys(app.name, QUEUE).broadcast("state"), "seq", planted)
    handle = reload.delay(4)
    drain(a)
    assert handle.join(timeout=1) == {"a": 4}


@pytest.mark.parametrize("planted", ["abc", "-5", "9" * 20, "\x1b"])
def test_a_cursor_no_minitask_wrote_loses_no_call(
        app: Minitask, fake_redis: Any, planted: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """A damaged cursor restarted from the last call sent: the call sent after the
    damage never ran on that subscriber. At least once: from the oldest call logged."""
    from minitask.broker.keys import queue_keys

    @app.task(broadcast=True, queue=QUEUE)
    def reload(version: int) -> int:
        return version

    a = app.worker(queues=[QUEUE], subscriber="a")
    a.starting()
    reload.delay(1)
    drain(a)
    fake_redis.hset(queue_keys(app.name, QUEUE).broadcast("cursors"), "a", planted)
    handle = reload.delay(2)
    drain(a)
    assert handle.join(timeout=1) == {"a": 2}
    assert "restarts from the oldest call still logged" in caplog.text
