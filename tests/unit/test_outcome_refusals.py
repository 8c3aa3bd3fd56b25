"""An outcome's write Redis refuses for the queue's own data is not retried for ever
(issue 29, H1): the worker gives it up at once, says so naming the task and the key,
and no longer holds the task (its lease expires and it is delivered again). An
outage, or a refusal of the whole server, is still ridden out."""
from __future__ import annotations

import logging
import threading
from typing import Any, List

import pytest

from minitask.errors import BrokerError
from minitask.worker.outages import persist
from minitask.worker.outages import Refused, unless_refused

REFUSAL = ("minitask script ack refused: WRONGTYPE minitask key minitask:{app:base}:dead "
           "holds another type than the zset minitask keeps there; nothing was changed")


def test_a_refusal_of_the_queues_data_is_given_up_at_once_and_said(
        caplog: pytest.LogCaptureFixture) -> None:
    calls: List[int] = []

    def step() -> Any:
        calls.append(1)
        raise BrokerError(REFUSAL, reason="script")

    done = threading.Event()
    got: List[Any] = []

    def run() -> None:
        got.append(persist(unless_refused(step), "dead-letter task T1"))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(5), "the refused outcome was retried for ever"
    assert calls == [1]
    [refused] = got
    assert isinstance(refused, Refused)
    with caplog.at_level(logging.ERROR, logger="minitask.worker.outcomes"):
        refused.say("dead-letter task T1")
    [record] = caplog.records
    assert "could not dead-letter task T1" in record.getMessage()
    assert "minitask:{app:base}:dead" in record.getMessage()
    assert "of task ID" not in record.getMessage()


@pytest.mark.parametrize("error", [BrokerError("Redis could not be reached",
                                               reason="unreachable"),
                                   BrokerError("NOPERM this user has no permissions",
                                               reason="error")])
def test_an_outage_or_a_refusal_of_the_whole_server_is_still_retried(
        error: BrokerError) -> None:
    calls: List[int] = []

    def step() -> Any:
        calls.append(1)
        if len(calls) < 3:
            raise error
        return True

    assert persist(unless_refused(step), "record the result of task T2") is True
    assert calls == [1, 1, 1]
