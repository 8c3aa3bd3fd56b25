"""What a batch's error says when its write was refused or cut in part.

``QueueStore.enqueue_queues`` writes an ``app.batch()`` block as one script call per
queue (and chunk), each all or nothing, not all or nothing across them: a refused
call, or a write cut short, leaves some calls enqueued and others not. These name
each queue's calls (tasks and ids) on the side they fell, so that the caller sends
again only what was not enqueued.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

from ..errors import BrokerError
from ..printable import printable
from ..wire.serializer import decode_message


def refused_in_part(what: str, broker: str,
                    parts: Sequence[Tuple[str, Sequence[Tuple[str, bytes, int, int]]]],
                    replies: Sequence[Any]) -> BrokerError:
    """The error of a batch whose calls Redis refused in part (``replies``: each call's
    reply, its refusal, or None: never sent after one): ``sent`` when some calls were
    enqueued, or may have been (a refusal inside a script, after its writes: ``sent``);
    ``enqueued_ids`` those Redis enqueued, ``task_ids`` those and the maybe; the refused
    and the never sent, its ``unsent_ids``. Marked ``batch_told``: the block's error as
    it is (``Sender.batch`` passes it on)."""
    enqueued: List[str] = []
    maybe: List[str] = []
    unsent: List[str] = []
    for (_, entries), reply in zip(parts, replies):
        (enqueued if _done(reply) else maybe if _maybe(reply) else unsent).extend(
            entry[0] for entry in entries)
    refusal = next(reply for reply in replies if isinstance(reply, BrokerError))
    error = BrokerError(partly_enqueued(what, broker, parts, replies), reason=refusal.reason,
                        sent=bool(enqueued or maybe), task_ids=enqueued + maybe,
                        enqueued_ids=enqueued, unsent_ids=unsent)
    error.batch_told = True
    error.part_way = any(_maybe(reply) and reply.part_way for reply in replies)
    return error


def written_or_maybe(parts: Sequence[Tuple[str, Any]], replies: Sequence[Any]) -> List[Any]:
    """The parts whose calls were enqueued or may have been (their queues listed)."""
    return [part for part, reply in zip(parts, replies) if _done(reply) or _maybe(reply)]


def _done(reply: Any) -> bool:
    """A call's reply: enqueued (Redis answered it)."""
    return reply is not None and not isinstance(reply, Exception)


def _maybe(reply: Any) -> bool:
    """A call's reply: refused part way through its script, after writing (``sent``)."""
    return isinstance(reply, BrokerError) and reply.sent


def partly_enqueued(what: str, broker: str,
                    parts: Sequence[Tuple[str, Sequence[Tuple[str, bytes, int, int]]]],
                    replies: Sequence[Any]) -> str:
    """What a batch whose calls were refused in part did, in that order: how many of its
    calls were enqueued and how many not; each refused queue's calls with its refusal
    (less the "could not ``what`` (broker ...)" every refusal starts with); those never
    sent after a refusal; those enqueued all the same (sending them again
    would run them twice); and what to do."""
    head = f"could not {what} (broker {broker}): "
    counted = list(zip(parts, replies))
    sent = [part for part, reply in counted if _done(reply)]
    maybe = [part for part, reply in counted if _maybe(reply)]
    total, enqueued = sum(len(part[1]) for part in parts), sum(len(part[1]) for part in sent)
    perhaps = sum(len(part[1]) for part in maybe)
    state = "partly enqueued" if sent else "perhaps partly enqueued" if maybe else "not enqueued"
    said = [f"app.batch() block {state} (broker {broker}): {enqueued} of its {total} call(s) "
            f"enqueued, " + (f"{perhaps} perhaps, " if perhaps else "")
            + f"{total - enqueued - perhaps} not"]
    for part, reply in counted:
        if _maybe(reply):
            said.append(f"may have been enqueued (refused part way through its script, "
                        f"after writing): {_calls([part])}: {_refusal(str(reply), head)}")
        elif isinstance(reply, Exception):
            said.append(f"not enqueued: {_calls([part])}, refused by Redis: "
                        f"{_refusal(str(reply), head)}")
    unsent = [part for part, reply in counted if reply is None]
    if unsent:
        said.append(f"not enqueued (not sent after the refusal): {_calls(unsent)}")
    if sent:
        said.append(f"enqueued, and they will run (do not send them again): {_calls(sent)}")
    if sent or maybe:
        # refused part way through its script: a task it had not finished is left not
        # pending, and its task_id= queues it once (broker.refusals.PART_WAY: its refusal says)
        part_way = any(_maybe(reply) and reply.part_way for reply in replies)
        resend = "with their own task_id= they never run twice" + (
            ", and one a refusal part way left unfinished, sent so once the ACL allows "
            "the command refused, is queued once" if part_way else "")
        said.append(f"the error's enqueued_ids name those enqueued, its task_ids those and "
                    f"the calls that may have been (check those with their handle's "
                    f"status(): do not send them again as they were, which could run them "
                    f"twice; {resend}), its unsent_ids the calls not enqueued (their "
                    f"handles raise BatchNotSent)")
        said.append("fix what the refusal names, then send again only the calls not enqueued"
                    + (", and those refused part way with their own task_id=" if part_way
                       else ""))
    else:
        said.append("nothing of the block was written: fix what the refusal names, then "
                    "send the block again")
    return "; ".join(said)


def cut_write(error: BrokerError,
              parts: Sequence[Tuple[str, Sequence[Tuple[str, bytes, int, int]]]],
              whole: int, answered: int = 0) -> BrokerError:
    """``error`` of a batch's write cut after ``whole`` of its calls: those may have been
    enqueued (``task_ids``; the first ``answered`` were, Redis said: ``enqueued_ids``),
    the others never reached Redis (``unsent_ids``)."""
    said = f"{error}; the write was cut after {whole} of its {len(parts)} script call(s)"
    if whole < len(parts):
        said += f": not enqueued (never reached Redis): {_calls(parts[whole:])}"
    if answered:
        said += f"; enqueued (do not send them again): {_calls(parts[:answered])}"
    ids = [entry[0] for _, entries in parts[:whole] for entry in entries]
    done = sum(len(entries) for _, entries in parts[:answered])
    cut = BrokerError(f"{said}; may have been enqueued: {_calls(parts[answered:whole])}",
                      reason=error.reason, sent=True, task_ids=ids, enqueued_ids=ids[:done],
                      unsent_ids=[entry[0] for _, entries in parts[whole:] for entry in entries])
    cut.sent_calls = whole
    cut.part_way = error.part_way  # (its text says a resend by task_id= waits for the ACL)
    return cut


def _refusal(message: str, head: str) -> str:
    """A refused call's BrokerError as ``partly_enqueued`` quotes it: without the
    ``head`` it shares with the others, and its script's "nothing was changed" said of
    its queue (the others' calls may have been enqueued)."""
    if message.startswith(head):
        message = message[len(head):]
    return message.replace("nothing was changed", "none of this queue's calls was written")


def _calls(parts: Sequence[Tuple[str, Sequence[Tuple[str, bytes, int, int]]]]) -> str:
    """Queues' calls as an error names them: queue, task names, ids (the first few)."""
    shown = []
    for queue, entries in parts:
        names = []
        for _, body, _, _ in entries:
            try:
                name = decode_message(body).task
            except Exception:  # noqa: BLE001 - a name is only said, never needed
                name = "?"
            if name not in names:
                names.append(name)
        ids = ", ".join(printable(entry[0]) for entry in entries[:_IDS_SHOWN])
        more = f" and {len(entries) - _IDS_SHOWN} more" if len(entries) > _IDS_SHOWN else ""
        shown.append(f"queue {printable(queue)!r}: {len(entries)} call(s) of task(s) "
                     f"{', '.join(map(printable, names))} (id(s) {ids}{more})")
    return "; ".join(shown)


#: Task ids an error of a batch names per queue's call (the rest are counted).
_IDS_SHOWN = 5
