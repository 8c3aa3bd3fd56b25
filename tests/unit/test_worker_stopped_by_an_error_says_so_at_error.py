"""A worker that an error stops logs its "stopped" line at ERROR, one that a stop or the
end of a burst ends at INFO; and an error's hint follows redis-py's text without ".;"
(trial34: a worker on an unreachable Redis logged "stopped (by BrokerError ...)" at
INFO, its text "Connection refused.; is Redis running and reachable?")."""
from __future__ import annotations

import logging

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.refusals import broker_error


def _stopped(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    return [r for r in caplog.records if " stopped (" in r.getMessage()][-1]


@pytest.mark.app("unreachable", on="offline")
def test_a_worker_that_cannot_reach_redis_logs_its_stop_at_error(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="minitask"):
        with pytest.raises(BrokerError) as raised:
            app.worker(burst=True, pool="thread").run()
    stopped = _stopped(caplog)
    assert stopped.levelno == logging.ERROR, stopped.getMessage()
    assert "stopped (by BrokerError: " in stopped.getMessage()
    assert ".;" not in str(raised.value) and "; is Redis running" in str(raised.value)


def test_a_burst_worker_logs_its_stop_at_info(app: Minitask,
                                              caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="minitask"):
        app.worker(burst=True, pool="thread").run()
    assert _stopped(caplog).levelno == logging.INFO


def test_a_worker_run_inside_an_except_block_logs_its_stop_at_info(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="minitask"):
        try:
            raise ValueError("handled by the caller")
        except ValueError:
            app.worker(burst=True, pool="thread").run()
    assert _stopped(caplog).levelno == logging.INFO


def test_a_hint_after_a_sentence_of_redis_py_is_not_doubly_punctuated() -> None:
    error = broker_error(redis.ConnectionError("Error 111 connecting to h:6379. Connection "
                                               "refused."), "fetch from queue 'q'",
                         "redis://h:6379/0")
    assert str(error) == ("could not fetch from queue 'q' (broker redis://h:6379/0): Error "
                          "111 connecting to h:6379. Connection refused; is Redis running "
                          "and reachable?")
