"""A workflow's explicit step ids stay reserved when its sending raised a
DurabilityError (written, only not confirmed: sent again, the workflow would run
twice, and the reservation is what refuses that); any other failure releases them."""
from __future__ import annotations

from typing import Any, List

import pytest

from minitask.errors import BrokerError, DurabilityError
from minitask.stores.step_ids import ids_reserved


class _Store:
    def __init__(self) -> None:
        self.released: List[Any] = []

    def reserve(self, ids: Any, wid: str, ttl_ms: int) -> List[Any]:
        return []

    def release(self, ids: Any, wid: str) -> None:
        self.released.append((list(ids), wid))


@pytest.mark.parametrize("error, released", [
    (DurabilityError("not confirmed", task_id="w", confirmed=0), []),
    (BrokerError("Redis is unreachable", reason="unreachable"), [([("q", "s2")], "w")]),
])
def test_only_a_send_that_may_have_failed_releases_its_ids(
        error: BaseException, released: List[Any]) -> None:
    store = _Store()
    with pytest.raises(type(error)):
        with ids_reserved(store, [("q", "s2")], "chain", "w", 1000):  # type: ignore[arg-type]
            raise error
    assert store.released == released
