"""The coalescing progress writer: a task may call ``set_progress`` a million
times a second; Redis sees the latest value at most ``1 / INTERVAL`` times a
second per process, and always the last one.

A call only notes the value and rings a bell; one writer thread per process
(started on first use, so a forked child starts its own) writes every noted
value in one pipeline, then rests ``INTERVAL`` before the next write. A value
noted while it rests is written when the rest ends, so the last value reaches
Redis within ``INTERVAL`` even if the task never calls again. When an attempt
ends, its value still noted is written at once, before its outcome; one already
written gets its time to live again, so that it expires with the result, not a
``result_ttl`` after it was written. A report that comes once its attempt
has ended (from a thread the task left running) is dropped: the progress stays
as the attempt left it, beside its outcome.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Dict, List, Optional, Tuple

from ..context import Report
from ..errors import BrokerError, EncodeError
from ..printable import own_logger, printable, shown_id
from ..stores.progress import Entry
from ..wire.message import Message, to_ms
from ..wire.serializer import pack_progress
from .host import Host

logger = own_logger(__name__)

#: Seconds between two writes of one process: at most ten a second.
INTERVAL = 0.1
#: Seconds without a report after which the writer thread ends (a worker that is gone,
#: or a process that ran many workers, keeps no idle thread).
IDLE_END = 5.0

#: A noted report: (queue, task id, current, total, message, at_ms, ttl_ms); packed
#: only when written, so that a call in a tight loop stays cheap.
Noted = Tuple[str, str, float, Optional[float], Optional[str], int, int]


class ProgressWriter:
    """Notes progress reports and writes the latest of each task, coalesced."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._lock = threading.Lock()
        # Held from taking values to having written them: writes never overtake each
        # other, so an older value cannot land after the last one.
        self._writing = threading.Lock()
        self._pending: Dict[Tuple[str, str], Noted] = {}
        #: Attempts whose progress is in Redis -> its time to live (ms).
        self._written: Dict[Tuple[str, str], int] = {}
        #: Attempts running -> their reporter's own list: a report whose attempt is
        #: not (or no longer) the one here has ended, and is dropped.
        self._live: Dict[Tuple[str, str], List[int]] = {}
        self._bell = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._pid = 0
        #: Whether any attempt here reported progress: until one does, ``ended`` has
        #: nothing to write nor keep, and takes no lock.
        self._reported = False

    @property
    def reported(self) -> bool:
        """Whether any attempt here reported progress (``ended`` may write then)."""
        return self._reported

    def reporter(self, message: Message) -> Report:
        """What ``set_progress`` of this attempt calls (made for every attempt, used by
        few: what only a report needs is worked out at the report)."""
        host = self._host
        lock = self._lock
        live = self._live
        key = (message.queue, message.id)
        found: List[int] = []  # the result's ttl, once a report needs it
        live[key] = found  # (no lock: one dict store, as ``ended``'s pop)

        def report(current: float, total: Optional[float], note: Optional[str]) -> None:
            if not found:
                task = host.tasks.get(message.task)
                found.append(to_ms(task.options.result_ttl if task is not None
                                   else host.result_ttl))
            noted = (message.queue, message.id, current, total, note, host.clock.now_ms(),
                     found[0])
            self._reported = True
            with lock:  # ``ended`` takes this lock after it ends the attempt
                taken = live.get(key) is found
                if taken:
                    self._pending[key] = noted
            if not taken:
                self._late(message, found)
            elif not self._bell.is_set():
                self._ring()
        return report

    @staticmethod
    def _late(message: Message, found: List[int]) -> None:
        """A report of an attempt that has ended: dropped, said once per attempt."""
        if len(found) > 1:
            return
        found.append(0)  # (said)
        logger.warning("task %r (id %s): set_progress after its attempt ended is ignored "
                       "(a thread the task left running?); its progress stays as the "
                       "attempt left it (said once per attempt)", printable(message.task),
                       shown_id(message.id),
                       extra={"task_id": message.id, "task_name": message.task})

    def _ring(self) -> None:
        with self._lock:
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()  # a forked child starts a writer of its own
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name="minitask-progress")
                self._thread.start()
        self._bell.set()

    def ended(self, message: Message) -> None:
        """The attempt ended: write its last noted value now, if one waits, else
        start the time to live of the one written again. Its reports from now on
        are dropped."""
        key = (message.queue, message.id)
        self._live.pop(key, None)  # before ``_reported`` is read (see ``report``)
        if not self._reported:
            return
        with self._writing:
            with self._lock:
                entry = self._pending.pop(key, None)
            if entry is not None:
                self._write([entry])  # never raises: the outcome is written next
            ttl_ms = self._written.pop(key, None)
            if entry is None and ttl_ms is not None:
                try:
                    self._host.broker.progress.touch(message.queue, message.id, ttl_ms)
                except BrokerError as exc:
                    logger.warning("could not keep the progress of task %s: %s",
                                   message.id, exc)

    def _loop(self) -> None:
        while True:
            if not self._bell.wait(IDLE_END):
                with self._lock:  # idle: end; the next report starts a writer again
                    if not self._pending and not self._bell.is_set():
                        self._thread = None
                        return
                continue
            self._bell.clear()
            with self._writing:
                with self._lock:
                    entries, self._pending = list(self._pending.values()), {}
                if entries and not self._write(entries):
                    with self._lock:  # written next time, unless a newer value came
                        for entry in entries:
                            self._pending.setdefault((entry[0], entry[1]), entry)
                    self._bell.set()
            time.sleep(INTERVAL)  # the rest that bounds the write rate

    def _write(self, noted: List[Noted]) -> bool:
        """Write noted values; False when Redis failed (they are worth another try).

        A value that cannot be packed is logged and dropped, never raised: it must
        not change its task's outcome (``ended`` writes in the task's thread) nor
        end the writer thread, which carries every later task's progress.
        """
        entries: List[Entry] = []
        for queue, task_id, current, total, note, at_ms, ttl in noted:
            try:
                entries.append((queue, task_id, pack_progress(current, total, note, at_ms), ttl))
            except EncodeError as exc:
                logger.warning("task %s: its progress was not recorded: %s", task_id, exc)
        if not entries:
            return True
        try:
            self._host.broker.progress.write(entries)
        except BrokerError as exc:
            logger.warning("could not record the progress of %d task(s): %s", len(entries), exc)
            return False
        for queue, task_id, _, ttl_ms in entries:
            self._written[queue, task_id] = ttl_ms
        return True
