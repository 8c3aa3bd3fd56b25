"""The subscribers of a queue's broadcast calls, and removing one gone for good."""
from __future__ import annotations

import datetime as _dt
from typing import List, Tuple

from ..broadcast import Subscriber
from ..broker.durability import keep_unconfirmed
from ..sending import check_key_part, check_queue_name
from ..wire.message import to_seconds
from .operated import Operated


def subscribers(app: Operated, queue: str) -> List[Subscriber]:
    """``Minitask.subscribers``: by name, with their lag."""
    check_queue_name(queue)
    return [Subscriber(c.name, c.lag, None if c.last_seen_ms is None else
                       _dt.datetime.fromtimestamp(to_seconds(c.last_seen_ms),
                                                  tz=_dt.timezone.utc))
            for c in app.broker.broadcasts.cursors(queue)]


def unsubscribe(app: Operated, queue: str, name: str) -> bool:
    """``Minitask.unsubscribe``: False when ``name`` was not a subscriber of ``queue``."""
    check_queue_name(queue)
    check_key_part("subscriber", name)
    return app.broker.broadcasts.unsubscribe(queue, name)


def unsubscribed(app: Operated, queue: str, name: str) -> Tuple[bool, bool]:
    """``unsubscribe``, and whether replicas left its write unconfirmed (durability):
    made on the primary all the same, which ``minitask unsubscribe`` says rather than
    fail."""
    with keep_unconfirmed() as unconfirmed:
        gone = unsubscribe(app, queue, name)
    return gone, bool(unconfirmed)
