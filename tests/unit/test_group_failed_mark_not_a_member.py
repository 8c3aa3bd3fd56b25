"""A group's failed mark that names no member (planted ``abc``, an index past the
group's size, ``07``) or comes without its failure ends the chord's body naming the
group, rather than answering "another member failed" to every member so that the body
is neither sent nor ended (probe 15: ``get()`` without a timeout waited for ever,
nothing dead-lettered or logged)."""
from __future__ import annotations

from typing import Callable, Dict

import pytest
import redis

from minitask import Minitask
from tests.support.chords import body_ended, sent_chord

PLANTS: Dict[str, Dict[str, bytes]] = {
    "text": {"failed_index": b"abc", "failed": b"\x92\xa1a\xa1b"},
    "past the size": {"failed_index": b"7", "failed": b"\x92\xa1a\xa1b"},
    "negative": {"failed_index": b"-1", "failed": b"\x92\xa1a\xa1b"},
    "leading zero": {"failed_index": b"01", "failed": b"\x92\xa1a\xa1b"},
    "minus zero": {"failed_index": b"-0", "failed": b"\x92\xa1a\xa1b"},
    "no failure": {"failed_index": b"1"},
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_failed_mark_naming_no_member_ends_the_body_naming_the_group(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        plant: str) -> None:
    app, seen, handle, group_key = sent_chord(make_app, redis_client)
    redis_client.hset(group_key, mapping=PLANTS[plant])  # type: ignore[arg-type]
    messages = body_ended(app, seen, handle, "its failed member is no member index")
    assert messages and all(group_key.decode() in message for message in messages), messages
