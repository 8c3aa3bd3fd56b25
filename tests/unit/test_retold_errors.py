"""An error retold (``errors.retold``) keeps every attribute of the one it tells: a cut
batch's ``sent_calls`` and a write's ``written`` were dropped by the five places that
copied fields by hand (review29j)."""
from __future__ import annotations

from minitask.broker.durability import Kept
from minitask.errors import BrokerError, DurabilityError, retold
from minitask.sending import _lost_batch


def _cut() -> BrokerError:
    error = BrokerError("cut", reason="unreachable", sent=True, task_ids=["a"],
                        enqueued_ids=[], unsent_ids=["b"])
    error.sent_calls, error.written = 1, True
    return error


def test_retold_keeps_every_attribute_but_those_given() -> None:
    told = retold(_cut(), "told", task_ids=["x", "y"])
    assert str(told) == "told" and told.reason == "unreachable" and told.sent
    assert told.sent_calls == 1 and told.written
    assert told.task_ids == ["x", "y"] and told.task_id == "x" and told.unsent_ids == ["b"]


def test_a_cut_batch_told_keeps_its_sent_calls() -> None:
    told = _lost_batch(_cut(), ["a"], 2)
    assert told.sent_calls == 1 and told.unsent_ids == ["b"]


def test_kept_told_keeps_written_and_sent_calls() -> None:
    kept = Kept()
    kept.append(DurabilityError("unconfirmed", task_id=None, confirmed=0))
    kept.note(["a"], 0)
    told = kept.told(_cut())
    assert told.sent_calls == 1 and told.written and told.unconfirmed_ids == ["a"]
