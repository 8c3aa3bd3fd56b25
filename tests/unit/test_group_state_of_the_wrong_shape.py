"""A group's state whose ``next`` or ``failed`` field holds msgpack of a shape minitask
never writes (a list where what follows the group goes, a map where a failure goes)
ends the chord's body, naming the group, rather than leaving it pending for ever; the
member that meets it is dead-lettered saying so (probe 14: "(undecodable) ... TypeError:
list indices must be integers or slices, not str", and the body never ended)."""
from __future__ import annotations

from typing import Callable, Dict

import pytest
import redis

from minitask import Minitask
from tests.support.chords import planted_state_ends_body

PLANTS: Dict[str, Dict[str, bytes]] = {
    "next a list": {"next": b"\x93\x01\x02\x03"},
    "next a number": {"next": b"\x07"},
    "next a join without its id": {"next": b"\x81\xa1k\xa4join"},
    "failed a map": {"failed_index": b"0", "failed": b"\x81\xa1x\x01"},
    "failed too short": {"failed_index": b"0", "failed": b"\x92\xa1a\xa1b"},
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_group_state_field_of_the_wrong_shape_ends_the_body_naming_the_group(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        plant: str) -> None:
    messages, _ = planted_state_ends_body(make_app, redis_client, PLANTS[plant])
    assert messages, "the member that met it is dead-lettered, saying why"
    assert any("not what minitask writes" in message and "(undecodable)" not in message
               for message in messages), messages
