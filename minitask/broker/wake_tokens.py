"""What an idle worker's BLPOP takes off a wake list, looked at.

minitask pushes one kind of element there, the token ``1``. A blocking pop
always returns the element it takes, whatever its length, so an element no
minitask pushed (a 100 MB one) reaches the one waiter whose BLPOP takes it,
once: it is off the list then, read by no one again. That waiter says so, at
most once a ``SAID_EVERY`` seconds per key (the others counted into the next
line): the key, escaped, and the element's length, never its content.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, List, Optional

from ..printable import own_logger, printable

logger = own_logger(__name__)

#: The one element minitask pushes on a wake list.
TOKEN = b"1"
#: Seconds between two lines about one key at most.
SAID_EVERY = 60.0
#: Keys remembered at once (the least recent forgotten): memory stays this size.
KEYS_KEPT = 512

_LOCK = threading.Lock()
#: key -> [when it was said last, elements taken since and not said]
_SAID: "OrderedDict[str, List[float]]" = OrderedDict()


def taken(reply: Any) -> Optional[str]:
    """Look at a BLPOP's ``reply`` ([key, element], or None when it timed out): say an
    element that is not a token (rate-limited per key). Returns the key it came off
    (its queue may have work: ``worker.empties``), or None. It never raises."""
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        return None
    came_off = _text(reply[0])
    if reply[1] == TOKEN:
        return came_off
    key, element = printable(reply[0]), reply[1]
    size = len(element) if isinstance(element, (bytes, str)) else 0
    now = time.monotonic()
    with _LOCK:
        said = _SAID.get(key)
        if said is not None and now - said[0] < SAID_EVERY:
            said[1] += 1
            return came_off
        more = int(said[1]) if said is not None else 0
        _SAID[key] = [now, 0]
        _SAID.move_to_end(key)
        while len(_SAID) > KEYS_KEPT:
            _SAID.popitem(last=False)
    logger.warning("minitask key %s (a wake list) held an element no minitask pushes "
                   "(%s bytes, not shown): taken off by this worker's wait and ignored%s",
                   key, f"{size:,}", f"; {more} more since the last line" if more else "")
    return came_off


def _text(key: Any) -> str:
    """A key as redis-py sent it: a str is sent in UTF-8."""
    return key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
