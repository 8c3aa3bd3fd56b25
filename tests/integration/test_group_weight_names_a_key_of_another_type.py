"""``set_group_weight`` on a queue whose hash of group weights holds another type
(data minitask did not write) names that key and says nothing changed, as
``pause_group`` and ``resume_group`` name theirs (probe 29h, L2; a real redis-server)."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.errors import BrokerError

pytestmark = [pytest.mark.integration, pytest.mark.app("weighty", on="server")]


@pytest.fixture
def fair(app: Minitask) -> Minitask:
    app.task(group_by="tenant", name="job")(lambda tenant: tenant)
    return app


@pytest.mark.parametrize("weight", [3, 1])  # an HSET, and the HDEL of weight 1
def test_a_weights_key_of_another_type_is_named(
        fair: Minitask, admin: "redis.Redis[bytes]", weight: int) -> None:
    key = queue_keys(fair.name, "default").groups_weight
    admin.set(key, "planted")
    with pytest.raises(BrokerError) as caught:
        fair.set_group_weight("default", "A", weight)
    said = str(caught.value)
    assert caught.value.reason == "wrong type"
    assert said.startswith("could not set the weight of group 'A' of queue 'default': "
                           f"minitask key {key} (the groups' weights, a hash) holds "
                           f"another type"), said
    assert "nothing was changed" in said
    assert admin.get(key) == b"planted"


def test_the_weight_is_set_when_the_key_is_a_hash(
        fair: Minitask, admin: "redis.Redis[bytes]") -> None:
    key = queue_keys(fair.name, "default").groups_weight
    fair.set_group_weight("default", "A", 4)
    assert admin.hget(key, "A") == b"4"
    fair.set_group_weight("default", "A", 1)
    assert admin.hget(key, "A") is None
