"""The subscribers of a queue's broadcast calls, and removing one gone for good."""
from __future__ import annotations

from typing import List

from ..broadcast import Subscriber, subscriber_list
from ..sending import check_key_part, check_queue_name
from .operated import Operated


def subscribers(app: Operated, queue: str) -> List[Subscriber]:
    """``Minitask.subscribers``: by name, with their lag."""
    check_queue_name(queue)
    return subscriber_list(app.broker, queue)


def unsubscribe(app: Operated, queue: str, name: str) -> bool:
    """``Minitask.unsubscribe``: False when ``name`` was not a subscriber of ``queue``."""
    check_queue_name(queue)
    check_key_part("subscriber", name)
    return app.broker.broadcasts.unsubscribe(queue, name)
