"""Log lines said at most so often: a trouble met a thousand times a second is said
once a minute, each line counting the times held back since the one before.

One ``LogThrottle`` per kind of line, keyed by what a line is about (a queue, a key;
``None`` for the worker's own). It takes a lock only when given one: a lock held as a
process pool forks stays held in the child for ever, and one in memory a child shares
with its supervisor stays held when the child is killed holding it.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from contextlib import nullcontext
from typing import Callable, ContextManager, Hashable, List, MutableSequence

#: Seconds between two lines about one key at least (one line a window): a minute.
EVERY = 60.0
#: Keys remembered at most: the least recently noted is forgotten first (its next line
#: is then said at once), so that memory stays bounded whatever the keys.
KEYS = 1024
# a key's slots: when its window began, the lines said in it, the count not said since
_START, _LINES, _HELD = range(3)


def _monotonic() -> float:
    return time.monotonic()  # read anew each time: a test's patched clock reaches it


def _fresh() -> List[float]:
    return [0.0, 0.0, 0.0]


class LogThrottle:
    """Per key: may a line be said now, and what it counts since the last one."""

    def __init__(self, every: float = EVERY, *, lines: int = 1, keys: int = KEYS,
                 clock: Callable[[], float] = _monotonic,
                 slots: Callable[[], MutableSequence[float]] = _fresh,
                 lock: ContextManager[object] = nullcontext()) -> None:
        """``lines`` a key may say in a window of ``every`` seconds, which begins with
        its first line; ``clock``: seconds, monotonic or not (a clock gone back begins
        a new window at once, never holding lines back); ``slots``: where a new key's
        three numbers live, zeroed (a process pool's shared memory, say: each process
        then sees the others' lines); ``lock``: held around each call, for an owner
        whose threads share the throttle."""
        self.every = every
        self.lines = lines
        self.keys = keys
        self._clock = clock
        self._slots = slots
        self._lock = lock
        self._by_key: "OrderedDict[Hashable, MutableSequence[float]]" = OrderedDict()

    def __len__(self) -> int:
        """Keys remembered now."""
        return len(self._by_key)

    def note(self, key: Hashable = None, count: int = 1) -> int:
        """Count ``count`` more of the key's events: the count a line says now (these
        and those held back since its last line), or 0: no line now (they are counted
        into its next). A ``count`` of 0 asks whether those held back are due."""
        with self._lock:
            slots = self._slot(key)
            slots[_HELD] += count
            if not slots[_HELD]:
                return 0
            now = self._clock()
            if not slots[_LINES] or not 0 <= now - slots[_START] < self.every:
                slots[_START], slots[_LINES] = now, 0
            if slots[_LINES] >= self.lines:
                return 0
            slots[_LINES] += 1
            said, slots[_HELD] = int(slots[_HELD]), 0
            return said

    def since(self, key: Hashable = None) -> float:
        """Seconds since the key's window began: since its last line, at one a window."""
        with self._lock:
            return self._clock() - self._slot(key)[_START]

    def forget(self, key: Hashable = None) -> int:
        """Forget the key (its next line is said at once): the count held back since its
        last line, for a line that ends it to say."""
        with self._lock:
            slots = self._by_key.pop(key, None)
            if slots is None:
                slots = self._slots()  # (shared slots: another process may have counted)
            held = int(slots[_HELD])
            slots[_START] = slots[_LINES] = slots[_HELD] = 0
            return held

    def _slot(self, key: Hashable) -> MutableSequence[float]:
        slots = self._by_key.get(key)
        if slots is not None:
            self._by_key.move_to_end(key)
            return slots
        slots = self._by_key[key] = self._slots()
        if len(self._by_key) > self.keys:
            self._by_key.popitem(last=False)
        return slots
