"""redis-py's "TTL exhausted." (a command redirected, MOVED or ASK, more times than it
follows: slots moving in a reshard or failover) is said by a worker as what it is, a
WARNING, and its retry's success at INFO, not as an ERROR "Redis refused to ..."
followed by "Redis is back" (issue 29, LOW): nothing was refused, nothing lost. The
error it becomes (``broker_error``) says so too. A real redis-py ClusterError, through
the worker's Backoff as its steps use it (a real reshard: tests/scale)."""
from __future__ import annotations

import logging

import pytest
from redis.exceptions import ClusterDownError, ClusterError

from minitask.broker.refusals import broker_error
from minitask.worker.outages import Backoff


def test_ttl_exhausted_is_a_warning_then_info(caplog: pytest.LogCaptureFixture) -> None:
    error = broker_error(ClusterError("TTL exhausted."), "fetch from queue 'q'", "cluster")
    assert error.moving and "slots are moving" in str(error)
    backoff = Backoff("fetch from queue 'q'")
    with caplog.at_level(logging.INFO, logger="minitask"):
        backoff.failed(error)
        backoff.failed(error)
        backoff.succeeded()
    levels = [(record.levelno, record.getMessage()) for record in caplog.records]
    assert all(level < logging.ERROR for level, _ in levels), levels
    assert any(level == logging.WARNING and "slots are moving" in text
               for level, text in levels), levels
    assert any(level == logging.INFO and "nothing was lost" in text for level, text in levels)
    assert not any("Redis is back" in text or "refused" in text for _, text in levels), levels


def test_other_cluster_errors_are_said_as_before(caplog: pytest.LogCaptureFixture) -> None:
    error = broker_error(ClusterDownError("CLUSTERDOWN The cluster is down"), "fetch", "c")
    assert not getattr(error, "moving", False)
    with caplog.at_level(logging.INFO, logger="minitask"):
        Backoff("fetch").failed(error)
    assert any(record.levelno == logging.ERROR for record in caplog.records)
