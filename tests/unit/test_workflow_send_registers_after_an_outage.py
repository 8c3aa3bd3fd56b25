"""A workflow whose send meets an outage may have been written (the reply lost on the
way): its queues are registered all the same, so that its steps are found by id; a send
Redis refused for a key of another type wrote nothing, and registers nothing."""
from __future__ import annotations

from typing import Any, List

import pytest

from minitask.errors import BrokerError, DurabilityError
from minitask.stores.workflow_checks import send_steps


class _Refusing:
    def __init__(self, error: BrokerError) -> None:
        self.error = error

    def run_calls(self, calls: Any, what: str) -> Any:
        raise self.error


def _sent(error: BrokerError, register_fails: bool = False) -> List[Any]:
    registered: List[Any] = []

    def register(steps: Any) -> None:
        registered.append(sorted(steps))
        if register_fails:
            raise BrokerError("Redis is unreachable", reason="unreachable")

    call = ("spawn", "default", [], [], 0)
    with pytest.raises(BrokerError) as raised:
        send_steps(_Refusing(error), None, {"default": []}, 0, [call],  # type: ignore[arg-type]
                   register)
    assert raised.value is error  # the send's error, not the registry's
    return registered


@pytest.mark.parametrize("error", [
    BrokerError("the reply timed out", reason="unreachable"),
    DurabilityError("replicas did not confirm in time", task_id=None, confirmed=0),
])
def test_a_send_that_may_have_been_written_registers_its_queues(error: BrokerError) -> None:
    assert _sent(error) == [["default"]]
    assert _sent(error, register_fails=True) == [["default"]]


@pytest.mark.parametrize("reason", ["wrong type", "script"])
def test_a_refused_send_registers_nothing(reason: str) -> None:
    assert _sent(BrokerError("WRONGTYPE ...", reason=reason)) == []
