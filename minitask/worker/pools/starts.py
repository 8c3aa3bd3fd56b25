"""A process pool child's start: what it does first (``die_with`` its supervisor), and
when the supervisor starts one in place of one that died (``Respawns``): at once,
unless children keep dying as they start.

A child that dies soon after it was started (``START_WINDOW``), having finished no
task, died at start. Its replacement most likely meets what killed it (a hook or an
import that fails the same way, a machine out of memory), and a supervisor that
forked it at once would fork hundreds a second, each death logged with its
traceback. So the first death at start is replaced at once, as any death is; each
further one in a row waits a growing delay (``FIRST_DELAY``, doubling up to
``MAX_DELAY``), and the row is said once, as it starts (again every
``SAY_AGAIN_AFTER`` seconds with how many died since), and once as it ends, when a
replacement has served for ``START_WINDOW``. A task is never held by it: a child
that dies at start runs none.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from typing import Dict, List

from ...log_throttle import LogThrottle
from ...printable import own_logger

logger = own_logger(__name__)

#: A child that dies within this many seconds of its start, having finished no task,
#: died at start; one that lives this long has started.
START_WINDOW = 5.0
#: The delay before the second child in a row that died at start is replaced (s); it
#: doubles with each further one, up to ``MAX_DELAY``.
FIRST_DELAY = 0.1
MAX_DELAY = 5.0
#: Least time between two warnings about children that keep dying at start (s).
SAY_AGAIN_AFTER = 60.0
#: prctl option from <linux/prctl.h>: the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


class Respawns:
    """The supervisor's record of its children's starts, and the replacements it owes."""

    def __init__(self) -> None:
        self._born: Dict[int, float] = {}  # pid -> when it was started (monotonic)
        self._owed: List[float] = []       # when each owed replacement is due
        self.row = 0                       # children in a row that died at start
        self._last_death = 0.0
        self._newest = 0                   # the pid of the last child started
        self._lived = 0.0                  # how long the last child to die lived
        self._said = LogThrottle(SAY_AGAIN_AFTER)  # deaths in the row, said

    @property
    def owed(self) -> bool:
        """Replacements are owed: the pool is not out of children for good."""
        return bool(self._owed)

    def started(self, pid: int) -> None:
        self._born[pid] = time.monotonic()
        self._newest = pid

    def ended(self, pid: int, served: bool) -> bool:
        """Child ``pid`` ended (``served``: it finished or ran a task, or its end was the
        supervisor's doing): whether it died at start, counted in the row."""
        now = time.monotonic()
        born = self._born.pop(pid, None)
        self._lived = 0.0 if born is None else now - born
        if served or born is None or self._lived >= START_WINDOW:
            if pid == self._newest:  # (another slot's child says nothing of the row)
                self._end_row(f"child {pid} served, then ended after {self._lived:.1f} s")
            return False
        if self.row and now - self._last_death > self.delay() + START_WINDOW:
            self._end_row("")  # a row long over: the next replacement starts at once
        self.row += 1
        self._last_death = now
        return True

    def delay(self) -> float:
        """How long the next replacement waits: none after a single death at start."""
        if self.row <= 1:
            return 0.0
        return min(MAX_DELAY, FIRST_DELAY * 2.0 ** min(self.row - 2, 16))

    def exited(self, pid: int, code: object) -> None:
        """Say that child ``pid`` exited between tasks (the supervisor replaces it): a row
        of deaths at start is said once, not once a death."""
        if self.row <= 1:
            logger.warning("child %d exited with code %s between tasks; replacing it", pid,
                           code)
            return
        if self.row == 2:  # the row's first line, said at once
            self._said.forget()
        unsaid = self._said.note()
        if self.row == 2:
            logger.error("children keep dying as they start: child %d ended (exit code %s) "
                         "%.1f s after its start, the second in a row; each is replaced with "
                         "a growing delay (%.1f s, doubling up to %.0f s) until one serves "
                         "for %.0f s (said again every %.0f s while they die)", pid, code,
                         self._lived, FIRST_DELAY, MAX_DELAY, START_WINDOW, SAY_AGAIN_AFTER)
        elif unsaid:
            logger.error("children still die as they start: %d more in a row since the "
                         "last warning, the last (child %d) with code %s; the next is "
                         "started in %.1f s", unsaid, pid, code, self.delay())
        else:
            logger.debug("child %d exited with code %s at start (%d in a row)", pid, code,
                         self.row)

    def owe(self) -> None:
        """A replacement is owed: due after ``delay()``."""
        self._owed.append(time.monotonic() + self.delay())

    def due(self) -> int:
        """How many owed replacements to start now (taken off the owed); a replacement
        that has served ``START_WINDOW`` ends the row, said."""
        now = time.monotonic()
        if self.row > 1 and self._newest in self._born and (
                now - self._born[self._newest] >= START_WINDOW):
            self._end_row(f"child {self._newest} has served for {START_WINDOW:.0f} s")
        if not self._owed:
            return 0
        count = sum(1 for at in self._owed if at <= now)
        self._owed = [at for at in self._owed if at > now]
        return count

    def _end_row(self, why: str) -> None:
        if self.row > 1 and why:
            logger.warning("children start again (%s), after %d in a row died as they "
                           "started", why, self.row)
        self.row = 0


def die_with(supervisor_pid: int) -> None:
    """Have the kernel kill this child when its supervisor dies.

    An orphan would go on fetching tasks that nobody can time-limit or stop;
    dying instead lets its leases expire, and a live worker takes them over.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            logger.warning("could not tie child %d to its supervisor: errno %d", os.getpid(),
                           ctypes.get_errno())
    if os.getppid() != supervisor_pid:  # it died before the call above took effect
        os._exit(1)


__all__: List[str] = ["Respawns", "die_with"]
