"""Dead letters: tasks that will not run again, listed, requeued or purged."""
from __future__ import annotations

import dataclasses
import datetime as _dt
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..broker.durability import keep_unconfirmed
from ..broker.refusals import without_script_marks
from ..errors import BrokerError, DecodeError
from ..printable import printable, shown_id, typed_back
from ..sending import BULK_CHUNK
from ..wire.message import to_seconds
from ..stores.dead import DeadHead, DeadLetter
from ..wire.serializer import decode_message, decode_outcome, encode_message
from ..wire.types import head_fields
from .activity import HIDDEN, args_text, hides_args
from .operated import Operated, known_queue, lookup_queues


@dataclass(frozen=True)
class DeadTask:
    """A task that will not run again, with why (see ``dead_letters()``).

    Attributes:
        task_id: the task's id.
        queue: the queue it was in.
        name: the task's name.
        args: its positional arguments.
        kwargs: its keyword arguments.
        reason: why, in a few words: ``failed``, ``out of attempts``, ``unknown
            task``, ``worker lost``...
        exc_type: the type of the last error, by name.
        message: the last error's message.
        traceback: the last error's traceback, as the worker printed it.
        dead_at: when it died, an aware UTC datetime.
        attempts: attempts made.
        args_hidden: the task is registered with ``hide_args=True``: ``args``
            and ``kwargs`` are left empty.
        unreadable: '' or why ``dead_at`` is not when it died: Redis holds no
            time minitask writes for it (inf, 1.5), naming the key; ``dead_at``
            is then that value clamped to the years a datetime holds.
    """

    task_id: str
    queue: str
    name: str
    args: List[Any]
    kwargs: Dict[str, Any]
    reason: str
    exc_type: str
    message: str
    traceback: str
    dead_at: _dt.datetime
    attempts: int
    args_hidden: bool = False
    unreadable: str = ""


def dead_letters(app: Operated, queue: Optional[str] = None, *, limit: int = 1000,
                 among: Optional[Sequence[str]] = None) -> List[DeadTask]:
    """``Minitask.dead_letters``: the app's dead tasks, oldest first (with no ``queue``:
    of the queues ``among`` names, by default those ``lookup_queues`` names, the
    declared ones and ``LOOKUP_OTHERS`` more of the queue registry)."""
    found: List[DeadTask] = []
    if queue is not None:
        known_queue(app, queue, "dead_letters")
    # only the queues that hold any, of a bounded number: a round trip per queue took
    # 6 s for 20,000 names, a round trip per 1,000 still grew with the registry
    asked = [queue] if queue is not None else app.broker.dead.holding(
        lookup_queues(app)[0] if among is None else among)
    for name in asked:
        for letter in app.broker.dead.letters(name, limit):
            found.append(_dead_task(app, letter.task_id, name, letter.dead_at_ms,
                                    letter.body, letter.info, _notes(letter),
                                    letter.record_problem))
    return found


#: Bytes of each dead letter's message and record a listing reads (``dead_rows``):
#: a row shows the task's name, its arguments cut to ARGS_CHARS and the error's first
#: line; a letter larger than this is read no further (``dead show`` reads it whole).
HEAD_BYTES = 16 * 1024


@dataclass(frozen=True)
class DeadRow:
    """A dead letter as a listing shows it: ``letter`` (its ``args``, ``kwargs``,
    ``traceback`` left empty), its arguments as short text (``args_text``), and what
    was too large to read here ('' when nothing)."""

    letter: DeadTask
    args: str
    cut: str = ""


def dead_rows(app: Operated, queue: Optional[str] = None, *, limit: int = 1000,
              among: Optional[Sequence[str]] = None) -> List[DeadRow]:
    """The dead letters ``dead_letters`` lists, as a listing's rows: at most
    ``HEAD_BYTES`` of each message and record are read (a letter of 500 kB costs a
    row what one of 500 bytes does)."""
    found: List[DeadRow] = []
    asked = [queue] if queue is not None else app.broker.dead.holding(
        lookup_queues(app)[0] if among is None else among)
    for name in asked:
        for head in app.broker.dead.heads(name, limit, HEAD_BYTES):
            found.append(_dead_row(app, head))
    return found


def _dead_row(app: Operated, head: DeadHead) -> DeadRow:
    whole_body = head.body_length <= HEAD_BYTES
    whole_info = head.info_length <= HEAD_BYTES
    letter = _dead_task(app, head.task_id, head.queue, head.dead_at_ms,
                        head.body if whole_body and head.body_length >= 0 else None,
                        head.info if whole_info and head.info_length >= 0 else None,
                        head.unreadable, head.record_problem)
    cut = []
    if not whole_body:
        fields = head_fields(head.body)
        task, attempt = fields.get("task"), fields.get("attempt")
        letter = dataclasses.replace(
            letter, name=task if isinstance(task, str) and task else "?",
            attempts=attempt if type(attempt) is int and attempt > 0 else 0,
            args_hidden=hides_args(app, task) if isinstance(task, str) else False)
        cut.append(f"its message ({head.body_length:,} bytes"
                   + (", too large: not read)" if head.body_too_large else ")"))
    if not whole_info:
        fields = head_fields(head.info)
        exc_type, text, reason = (fields.get(key) for key in ("exc_type", "message", "reason"))
        if head.record_problem:  # longer than minitask writes: not read
            reason = unreadable_record(head.record_problem)
        elif not fields:  # its first bytes are no map of this version: not minitask's
            reason = unreadable_record(f"its first {HEAD_BYTES:,} bytes are no record "
                                       f"minitask writes", head.info_length)
        letter = dataclasses.replace(
            letter, exc_type=exc_type if isinstance(exc_type, str) else "",
            message=text if isinstance(text, str) else "",
            reason=reason if isinstance(reason, str) else "")
        cut.append(f"its dead-letter record ({head.info_length:,} bytes)")
    if letter.args_hidden:
        shown = HIDDEN
    elif whole_body:
        shown = args_text(app, letter.name, letter.args, letter.kwargs)
    else:
        shown = f"({head.body_length:,} bytes: not read here)"
    letter = dataclasses.replace(letter, args=[], kwargs={}, traceback="")
    return DeadRow(letter, shown, " and ".join(cut) + " read in part" if cut else "")


def requeue_dead(app: Operated, task_id: str) -> bool:
    """``Minitask.requeue_dead``: a dead task back at the tail of its queue."""
    queue = dead_queue(app, task_id)
    return queue is not None and revive_dead(app, queue, task_id) == REQUEUED


def dead_queue(app: Operated, task_id: str) -> Optional[str]:
    """The queue whose dead letter ``task_id`` is, of those ``lookup_queues`` names,
    or None: what ``requeue_dead`` and ``purge_dead`` of an id act on."""
    # one round trip for the queues lookup_queues names (one a queue took 20,000)
    found = app.broker.dead.find(lookup_queues(app)[0], [_raw(task_id)])
    return None if found is None else found[0]


#: What ``revive_dead`` answers: requeued; or why not (no dead letter has the id; its
#: message is gone, so a requeue would run nothing: the fetch drops a ready id with no
#: message, as a cancelled one, and the letter would vanish unrun; it stays, for purge).
REQUEUED, NOT_DEAD, NO_MESSAGE = "requeued", "no dead letter has the id", (
    "its message is gone (nothing to run); purge it")
#: What ``revive_or_refusal`` answers of a letter requeued on the primary whose write
#: replicas did not confirm in time (durability): requeued, but a failover may lose it.
REQUEUED_UNCONFIRMED = "requeued, unconfirmed by replicas: may not survive a failover"


#: Why a dead letter whose message cannot be decoded is not requeued (probe 10, L3):
#: a worker would dead-letter it again at once, as it did; as a letter whose message
#: is gone (``NO_MESSAGE``), it stays, for ``dead show`` and purge.
UNDECODABLE = ("its message cannot be decoded ({why}): a worker would dead-letter it again; "
               "purge it")
#: Why a dead letter whose message names another task id is not requeued (probe 18): a
#: worker would run it, and record its outcome, under that other id; it stays, for
#: ``dead show`` and purge.
OTHER_ID = ("its message names another task id ({other}), not the letter's ({own}): no "
            "minitask wrote it; purge it")
#: What the decoder says of a message of a newer envelope version (wire/serializer.py
#: ``_unpack``): one is requeued as it is, for a worker of that newer minitask.
_NEWER = "written by a newer minitask"


def revive_dead(app: Operated, queue: str, task_id: str) -> str:
    """The dead task ``task_id`` of ``queue`` (found already) back at its queue's tail:
    ``REQUEUED``, or why not (``NOT_DEAD``, ``NO_MESSAGE``, ``UNDECODABLE`` with why:
    nothing is written then). A message of a newer minitask is requeued as it is."""
    broker = app.broker
    try:
        stored = broker.queues.message_body(queue, task_id)
    except DecodeError as exc:  # longer than minitask writes: not read, nothing written
        return UNDECODABLE.format(why=_cut(str(exc)))
    # no message: the script, which checks before it writes, answers NO_MESSAGE
    body = stored or b""
    priority = 5
    try:
        message = decode_message(body)
    except DecodeError as exc:
        if stored is not None and _NEWER not in str(exc):
            return UNDECODABLE.format(why=_cut(str(exc)))
    else:
        if message.id != task_id:
            return OTHER_ID.format(other=printable(shown_id(message.id)),
                                   own=printable(shown_id(task_id)))
        priority = message.priority
        body = encode_message(dataclasses.replace(
            message, enqueued_at_ms=app.clock.now_ms(), eta_ms=None, attempt=1))
    done = broker.dead.revive(queue, task_id, body, priority, app.clock.now_ms())
    return REQUEUED if done == 1 else NO_MESSAGE if done == -1 else NOT_DEAD


#: The reasons of a BrokerError that refuse one dead letter's call, not every call:
#: a key of its queue holds another type, a script met data it cannot read. Another
#: (Redis unreachable, an ACL, out of memory, a replica) would refuse the next letter
#: too.
LETTER_REFUSALS = ("script", "wrong type")


def revive_or_refusal(app: Operated, queue: str, task_id: str) -> str:
    """``revive_dead``, or, when Redis refused this letter's call (``LETTER_REFUSALS``:
    the script checks before it writes, nothing was written), why, in words that name
    the key: a requeue of many goes on past it (probe 29h, M1). ``REQUEUED_UNCONFIRMED``
    when Redis requeued it but replicas did not confirm that in time (the app's durability):
    it is requeued, and a requeue of many goes on. Any other BrokerError is raised."""
    try:
        with keep_unconfirmed() as unsure:
            answer = revive_dead(app, queue, task_id)
        return REQUEUED_UNCONFIRMED if unsure and answer == REQUEUED else answer
    except BrokerError as exc:
        if exc.reason not in LETTER_REFUSALS:
            raise
        said = printable(without_script_marks(str(exc.__cause__ or exc))).rstrip(". ")
        return (f"Redis refused it: {said.replace('nothing was changed', 'nothing was written')}"
                f"; inspect that key, then rename or delete it")


def _raw(task_id: str) -> bytes:
    """A task id as Redis holds it (one that cannot be UTF-8 is no dead letter's)."""
    return task_id.encode("utf-8", "backslashreplace")


def purge_dead(app: Operated, task_id: Optional[str] = None, *,
               queue: Optional[str] = None) -> int:
    """``Minitask.purge_dead``: dead letters deleted for good; returns how many."""
    purged = 0
    if queue is not None:  # a mistyped one would say "0 purged", as if it had acted
        known_queue(app, queue, "purge_dead")
    if task_id is not None:
        found = app.broker.dead.find([queue] if queue is not None else lookup_queues(app)[0],
                                     [_raw(task_id)])
        return 0 if found is None else app.broker.dead.purge(found[0], [task_id])
    for name in [queue] if queue is not None else app.broker.dead.holding(
            lookup_queues(app)[0]):
        while True:
            ids = app.broker.dead.ids(name, BULK_CHUNK)
            if not ids:
                break
            purged += app.broker.dead.purge(name, ids)
    return purged


def find_dead(app: Operated, shown: str,
              queues: Optional[Sequence[str]] = None) -> Optional[Tuple[str, bytes]]:
    """The queue and the id, as Redis holds it, of the dead letter a person named
    ``shown``: as typed, or as ``dead list`` showed it escaped (``typed_back``); of
    ``queues``, by default those ``lookup_queues`` asks."""
    return app.broker.dead.find(lookup_queues(app)[0] if queues is None else queues,
                                typed_back(shown))


def dead_letter(app: Operated, queue: str, task_id: bytes) -> Optional[DeadTask]:
    """One dead letter, by its queue and its id as Redis holds it (``find_dead``)."""
    letter = app.broker.dead.letter(queue, task_id)
    if letter is None:
        return None
    return _dead_task(app, letter.task_id, queue, letter.dead_at_ms, letter.body,
                      letter.info, _notes(letter), letter.record_problem)


def _notes(letter: DeadLetter) -> str:
    """What of a dead letter cannot be read: its time, its message (too large)."""
    return "; ".join(note for note in (letter.unreadable, letter.body_too_large) if note)


#: How a dead letter's reason begins when its record cannot be read (``unreadable_record``).
UNREADABLE_RECORD = "unreadable dead-letter record"
#: Characters of why a record cannot be read that its reason keeps (a decoder's words).
WHY_CHARS = 300


def unreadable_record(why: str, size: Optional[int] = None) -> str:
    """A dead letter's reason when its record cannot be read: why, and its length in
    bytes (None: Redis holds no value to measure)."""
    return f"{UNREADABLE_RECORD}: {_cut(why)}" + ("" if size is None else f" ({size:,} bytes)")


def _cut(why: str) -> str:
    """A decoder's words, cut to ``WHY_CHARS`` (an error of msgpack's may have none:
    "FormatError: " ends with its name)."""
    why = why.rstrip(": ")
    return why if len(why) <= WHY_CHARS else why[:WHY_CHARS - 3] + "..."


def _dead_task(app: Operated, task_id: str, queue: str, dead_at_ms: int,
               body: Optional[bytes], info: Optional[bytes], unreadable: str = "",
               record_problem: str = "") -> DeadTask:
    name, args, kwargs, attempts = "?", [], {}, 0
    try:
        message = decode_message(body or b"")
        name, args, kwargs, attempts = message.task, message.args, message.kwargs, message.attempt
    except DecodeError:
        pass  # an undecodable message is listed with what is known about it
    reason = exc_type = text = trace = ""
    if info is not None:  # one that cannot be read says why, in its reason: never raises
        try:
            outcome = decode_outcome(info)
            reason, exc_type, text, trace = (outcome.reason, outcome.exc_type, outcome.message,
                                             outcome.traceback)
        except DecodeError as exc:
            reason = unreadable_record(str(exc), len(info))
    elif record_problem:
        reason = unreadable_record(record_problem)
    hidden = hides_args(app, name)
    if hidden:
        args, kwargs = [], {}
    return DeadTask(task_id=task_id, queue=queue, name=name, args=args, kwargs=kwargs,
                    reason=reason, exc_type=exc_type, message=text, traceback=trace,
                    dead_at=_dt.datetime.fromtimestamp(to_seconds(dead_at_ms),
                                                       tz=_dt.timezone.utc),
                    attempts=attempts, args_hidden=hidden, unreadable=unreadable)
