"""A worker's own log lines, written while ``persist`` retries an outcome, are never
inside its ``keep_unconfirmed`` block: a user's logging handler that sends (an alert
task) must see its own write's DurabilityError, not have it swallowed and said as the
worker's (review29d F1)."""

import logging
from typing import Iterator, List

import pytest

from minitask.broker.durability import Durability
from minitask.errors import BrokerError, DurabilityError
from minitask.worker import outages
from minitask.worker.unconfirmed import UnconfirmedWrites

DURABLE = Durability("replicated", 1, 0.2)


class SendingHandler(logging.Handler):
    """Sends (a write replicas did not confirm) at each line the worker logs."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            DURABLE.check(0, "enqueue alert task", "alert-1")
        except DurabilityError:
            self.outcomes.append("raised")
        else:
            self.outcomes.append("swallowed")


@pytest.fixture
def handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[SendingHandler]:
    monkeypatch.setattr(outages.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(outages, "WRITES", UnconfirmedWrites())  # no outage said before
    sending = SendingHandler()
    logger = logging.getLogger("minitask")
    logger.addHandler(sending)
    try:
        yield sending
    finally:
        logger.removeHandler(sending)


def test_a_handler_sending_while_persist_backs_off_sees_its_own_error(
        handler: SendingHandler) -> None:
    tries: List[int] = []

    def step() -> str:
        tries.append(1)
        if len(tries) == 1:
            raise BrokerError("Redis refused: NOREPLICAS", reason="noreplicas")
        return "ok"

    assert outages.persist(step, "ack task t-1") == "ok"
    assert handler.outcomes and set(handler.outcomes) == {"raised"}, handler.outcomes


def test_an_earlier_attempts_unconfirmed_write_is_still_said(
        handler: SendingHandler, caplog: pytest.LogCaptureFixture) -> None:
    tries: List[int] = []

    def step() -> str:
        tries.append(1)
        DURABLE.check(0, "ack task t-2", "t-2")  # kept by persist's block: Redis wrote it
        if len(tries) == 1:
            raise BrokerError("connection reset", reason="outage")
        return "ok"

    with caplog.at_level(logging.WARNING, logger="minitask"):
        assert outages.persist(step, "ack task t-2") == "ok"
    said = [r.getMessage() for r in caplog.records if "did not confirm" in r.getMessage()]
    assert len(said) == 1 and "ack task t-2" in said[0], said
    assert "raised" in handler.outcomes and "swallowed" not in handler.outcomes
