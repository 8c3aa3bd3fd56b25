"""``minitask dead``: list, show, requeue and purge dead letters."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from ..admin import (HEAD_BYTES, LOOKUP_OTHERS, NOT_DEAD, REQUEUED, REQUEUED_UNCONFIRMED,
                     DeadTask, dead_letter, dead_letters, dead_rows, find_dead, lookup_queues,
                     revive_or_refusal)
from ..app import Minitask
from ..errors import BrokerError, ConfigurationError, error_said
from ..printable import printable, shown_id, shown_trace
from ..sending import BULK_CHUNK
from .options import (add_app_options, add_yes, check_given, confirmed, emit_json, known,
                      load, require_acl, takes_words, unknown_word)

ACTIONS = ("list", "show", "requeue", "purge")
USAGE = ("minitask dead -A APP {list | show ID | requeue (ID... | --all --yes) | purge (ID... "
         "| --all --yes)} [--queue Q] [--json]")


def register(commands: Any) -> None:
    dead = commands.add_parser("dead", help="list, show, requeue or purge dead letters",
                               usage=USAGE, description="Dead letters: tasks that will not "
                               "run again, kept with their arguments and why they died.")
    add_app_options(dead, level="WARNING")
    dead.add_argument("--queue",
                      help="only this queue (default: every queue of the app)")
    dead.add_argument("--all", action="store_true", help="requeue or purge every dead letter "
                      "(of --queue)")
    dead.add_argument("--json", action="store_true", help="print JSON")
    add_yes(dead, "every dead letter (--all)")
    takes_words(dead)
    dead.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    if not args.words:
        raise ConfigurationError(f"name an action: {', '.join(ACTIONS)} (usage: {USAGE})")
    if args.words[0] not in ACTIONS:
        raise ConfigurationError(unknown_word("action", args.words[0], ACTIONS,
                                              f"; usage: {USAGE}"))
    action, ids = args.words[0], args.words[1:]
    check_given("queue", args.queue)
    app = load(args.app)
    try:
        if args.queue is not None and not known(app, args.queue):
            return 1  # something named was not found
        if action == "list":
            _refuse(ids, "list takes no task id")
            return _list(app, args)
        if action == "show":
            if len(ids) != 1:
                raise ConfigurationError("show takes one task id")
            return _show(app, ids[0], args.queue, args.json)
        if bool(ids) == bool(args.all):
            raise ConfigurationError(f"{action} takes task ids, or --all (not both)" if ids else
                                     f"{action} takes the task ids of the dead letters to "
                                     f"{action}, or --all for every one; none was given")
        require_acl(app, ["revive"] if action == "requeue" else ["purge_dead"], args.queue,
                    f"{action} dead letters")
        if args.all:
            where = f"queue {args.queue!r}" if args.queue else "every queue"
            # counted, not read: a letter's body is read only when it is requeued
            count = sum(app.broker.dead.sizes(_asked(app, args.queue)[0]).values())
            confirmed(args, f"{action}s all {count} dead letter(s) of {where}")
        if action == "requeue":
            return _requeue(app, ids, args)
        return _purge(app, ids, args)
    finally:
        app.close()


def _refuse(ids: List[str], why: str) -> None:
    if ids:
        raise ConfigurationError(f"{why}, got {' '.join(ids)}")


def as_dict(dead: DeadTask) -> Dict[str, Any]:
    return {"task_id": dead.task_id, "queue": dead.queue, "name": dead.name, "args": dead.args,
            "kwargs": dead.kwargs, "reason": dead.reason, "exc_type": dead.exc_type,
            "message": dead.message, "traceback": dead.traceback,
            "dead_at": None if dead.unreadable else dead.dead_at.isoformat(),
            "attempts": dead.attempts, "args_hidden": dead.args_hidden,
            "unreadable": dead.unreadable}


def _list(app: Minitask, args: argparse.Namespace) -> int:
    asked, not_asked = _asked(app, args.queue)
    if args.json:  # whole letters, as app.dead_letters() gives them
        emit_json([as_dict(d) for d in dead_letters(app, args.queue, among=asked)])
        return 0
    # a row reads at most HEAD_BYTES of each letter (1,500 of 500 kB took 1 GB whole)
    rows = dead_rows(app, args.queue, among=asked)
    letters = [row.letter for row in rows]
    if not letters:
        print("no dead letters")
        _not_asked(not_asked)
        return 0
    print(f"{'dead at (UTC)':<20} {'queue':<14} {'task id':<24} {'task':<28} reason / error")
    for d in letters:
        error = error_said(d.exc_type, d.message) if d.exc_type else ""
        when = "unreadable (below)" if d.unreadable else f"{d.dead_at:%Y-%m-%d %H:%M:%S}"
        print(f"{when:<19}  {printable(d.queue):<14} {printable(shown_id(d.task_id)):<24} "
              f"{printable(d.name):<28} {printable(d.reason)}"
              f"{' / ' if error else ''}{printable(_cut(error, 80))}")
    print(f"\n{len(letters)} dead letter(s); minitask dead -A {args.app} show ID for one")
    _not_asked(not_asked)
    for d in letters:
        if d.unreadable:
            print(f"dead letter {printable(shown_id(d.task_id))}: {printable(d.unreadable)}")
    cut = [row for row in rows if row.cut]
    if cut:  # one line, however many: the rows say what they could
        print(f"{len(cut)} dead letter(s) read in part (their message or record is larger "
              f"than {HEAD_BYTES:,} bytes), the first "
              f"{printable(shown_id(cut[0].letter.task_id))}: "
              f"minitask dead -A {args.app} show ID reads one whole")
    return 0


def _asked(app: Minitask, queue: Optional[str]) -> Tuple[List[str], int]:
    """The queues a lookup asks (``queue``, or those ``lookup_queues`` names) and how
    many of the registry it does not: one reading of the registry, for both."""
    return ([queue], 0) if queue is not None else lookup_queues(app)


def _not_asked(not_asked: int) -> None:
    """Say how many queues of the registry a lookup in every queue did not look at."""
    if not_asked:
        print(f"(of the queues the app declares and {LOOKUP_OTHERS} of its queue registry: "
              f"{not_asked} more queue(s) in the registry were not looked at; --queue Q "
              f"lists one)", file=sys.stderr)


def _show(app: Minitask, shown: str, queue: Optional[str], as_json: bool) -> int:
    asked, not_asked = _asked(app, queue)
    found = find_dead(app, shown, asked)
    dead = None if found is None else dead_letter(app, *found)
    if dead is None:
        print(f"no dead letter has the id '{printable(shown)}' (minitask dead -A APP list "
              f"shows them)")
        _not_asked(not_asked)
        return 1
    if as_json:
        emit_json(as_dict(dead))
        return 0
    # what a record that cannot be read does not say is "unknown", never an empty line
    error = (printable(error_said(dead.exc_type, dead.message)) if dead.exc_type
             else printable(dead.message) if dead.message else "none recorded")
    arguments = ("args      (hidden: the task has hide_args=True)\n" if dead.args_hidden else
                 f"args      {printable(repr(dead.args))}\n"
                 f"kwargs    {printable(repr(dead.kwargs))}\n")
    print(f"task id   {printable(dead.task_id)}\nqueue     {printable(dead.queue)}\n"
          f"task      {printable(dead.name) if dead.name != '?' else _UNREAD}\n"
          f"{arguments}"
          f"attempts  {dead.attempts or 'unknown'}\n"
          f"dead at   {printable(dead.unreadable) or dead.dead_at.isoformat()}\n"
          f"reason    {printable(dead.reason) or 'unknown (no record says why)'}\n"
          f"error     {error}")
    if dead.traceback:
        print(f"\n{shown_trace(dead.traceback, dead.message)}")
    return 0


#: What ``dead show`` says of a task whose message cannot be read.
_UNREAD = "unknown (its message is missing or cannot be decoded)"


def _named(app: Minitask, ids: List[str], queue: Optional[str]) -> List[Tuple[str, Any]]:
    """Each id as typed, with the queue and the id as Redis holds it (None: no dead
    letter has it), an escaped id of ``dead list`` read back as what it stands for."""
    asked = _asked(app, queue)[0]  # the registry read once, for every id
    return [(shown, find_dead(app, shown, asked)) for shown in ids]


#: Lines the text output of a requeue or purge gives at most to letters it did not
#: act on and ids no dead letter has: past them, a count by reason (``--json`` lists
#: each). 300,000 letters whose message was gone printed 300,000 lines.
SHOWN_MOST = 20
#: Reasons the text output counts apart at most (the rest counted together).
REASONS_MOST = 10
#: Seconds between two progress lines (stderr) of ``requeue --all``.
PROGRESS_SECONDS = 2.0


class Tally:
    """What a requeue did: requeued, of them unconfirmed by replicas; those not
    requeued (id as shown, why) and ids no dead letter has. Held whole for ``--json``
    (its details); else the first SHOWN_MOST and counts: memory and output bounded."""

    def __init__(self, whole: bool) -> None:
        self.whole = whole
        self.requeued = self.unconfirmed = self.not_requeued = self.not_found = 0
        self.skipped: List[Tuple[str, str]] = []
        self.missing: List[str] = []
        self.reasons: Dict[str, int] = {}

    def counted(self, answer: str) -> bool:
        """Whether ``answer`` says the letter was requeued, counted (of them those
        unconfirmed by replicas: on the primary, so requeued all the same)."""
        if answer not in (REQUEUED, REQUEUED_UNCONFIRMED):
            return False
        self.requeued += 1
        self.unconfirmed += answer == REQUEUED_UNCONFIRMED
        return True

    def skip(self, shown: str, why: str) -> None:
        self.not_requeued += 1
        if self.whole or len(self.skipped) + len(self.missing) < SHOWN_MOST:
            self.skipped.append((shown, why))
        if why in self.reasons or len(self.reasons) < REASONS_MOST:
            self.reasons[why] = self.reasons.get(why, 0) + 1

    def miss(self, shown: str) -> None:
        self.not_found += 1
        if self.whole or len(self.skipped) + len(self.missing) < SHOWN_MOST:
            self.missing.append(shown)

    def looked(self) -> int:
        return self.requeued + self.not_requeued + self.not_found

    def say(self) -> None:
        """Say how many dead letters were requeued (and, once, how many of them
        replicas did not confirm in time), which were not and why, which ids no dead
        letter has: each (``--json``), or the first SHOWN_MOST and counts by reason."""
        if self.whole:
            emit_json({"requeued": self.requeued, "unconfirmed": self.unconfirmed,
                       "not_found": self.missing,
                       "not_requeued": [{"task_id": shown, "reason": why}
                                        for shown, why in self.skipped]})
            return
        note = (f" ({self.unconfirmed} of them unconfirmed by replicas: may not survive a "
                f"failover)" if self.unconfirmed else "")
        print(f"requeued {self.requeued} dead letter(s){note}")
        for shown, why in self.skipped:
            print(f"dead letter '{printable(shown)}' is not requeued: {why}")
        for task_id in self.missing:
            print(f"no dead letter has the id '{printable(task_id)}'")
        left = self.not_requeued - len(self.skipped)
        if left:
            print(f"... and {left:,} more dead letter(s) not requeued (--json lists each); "
                  f"{self.not_requeued:,} in all:")
            for why, count in sorted(self.reasons.items(), key=lambda item: -item[1]):
                print(f"  {count:,}: {why}")
            other = self.not_requeued - sum(self.reasons.values())
            if other:
                print(f"  {other:,}: other reasons")
        if self.not_found - len(self.missing):
            print(f"... and {self.not_found - len(self.missing):,} more id(s) no dead letter "
                  f"has (--json lists each)")


def _requeue(app: Minitask, ids: List[str], args: argparse.Namespace) -> int:
    # said, with those skipped, even when Redis fails midway
    tally = Tally(args.json)
    try:
        if args.all:
            _requeue_every(app, args.queue, tally)
        else:
            for shown, found in _named(app, ids, args.queue):
                answer = NOT_DEAD if found is None else _revived(app, *found)
                if answer == NOT_DEAD:
                    tally.miss(shown)
                elif not tally.counted(answer):
                    tally.skip(shown, answer)
    except BrokerError:  # Redis failed (a refusal of one letter is skipped): said below it
        tally.say()
        raise
    tally.say()
    return 1 if tally.not_found or tally.not_requeued else 0


def _requeue_every(app: Minitask, queue: Optional[str], tally: Tally) -> None:
    """Requeue every dead letter of ``queue`` (None: of the queues a lookup asks), read
    ``BULK_CHUNK`` ids at a time and one body at a time: memory stays the same with ten
    letters or a million. A letter that cannot be requeued (its id is not UTF-8, its
    message is gone, Redis refused its call: a key of its queue holds another type)
    stays in the dead set, is counted in ``tally`` with why, and is passed over by the
    next chunk; one gone meanwhile (requeued or purged by another) is neither. At most
    as many letters as a queue held when it began are taken, so that one dying again
    at once is not requeued twice. ``tally`` counts what it did. Every PROGRESS_SECONDS
    a line on stderr says how far it is (300,000 letters take minutes)."""
    sizes = app.broker.dead.sizes(_asked(app, queue)[0])
    total = sum(sizes.values())
    said = time.monotonic()
    for name, held in sizes.items():
        left, taken = 0, 0  # left: letters of the chunks so far still in the dead set
        while taken < held:
            chunk = app.broker.dead.ids(name, min(BULK_CHUNK, held - taken), left)
            if not chunk:
                break
            for raw in chunk:
                taken += 1
                answer = _revived(app, name, raw)
                if not tally.counted(answer) and answer != NOT_DEAD:
                    tally.skip(raw.decode("utf-8", "backslashreplace"), answer)
                    left += 1
            if time.monotonic() - said >= PROGRESS_SECONDS:
                said = time.monotonic()
                print(f"dead requeue: {tally.looked():,} of {total:,} dead letter(s) looked "
                      f"at, {tally.requeued:,} requeued, {tally.not_requeued:,} not",
                      file=sys.stderr, flush=True)


def _revived(app: Minitask, queue: str, raw: bytes) -> str:
    """Requeue the dead letter ``raw`` of ``queue``: ``REQUEUED``, ``NOT_DEAD``, or why
    it stays a dead letter (its id is not UTF-8; its message is gone; Redis refused its
    call, naming the key)."""
    task_id = _utf8(raw)
    if task_id is None:
        return NOT_UTF8
    return revive_or_refusal(app, queue, task_id)


#: Why a dead letter whose id is not UTF-8 is not requeued (``dead purge`` takes it).
NOT_UTF8 = "its id is not UTF-8 (no minitask wrote it); purge it"


def _utf8(raw: bytes) -> Optional[str]:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _purge(app: Minitask, ids: List[str], args: argparse.Namespace) -> int:
    missing: List[str] = []
    if args.all:
        purged = app.purge_dead(queue=args.queue)
    else:
        purged = 0
        for shown, found in _named(app, ids, args.queue):
            count = 0 if found is None else app.broker.dead.purge(found[0], [found[1]])
            purged += count
            if not count:
                missing.append(shown)
    if args.json:
        emit_json({"purged": purged, "not_found": missing})
    else:
        print(f"purged {purged} dead letter(s)")
        for task_id in missing[:SHOWN_MOST]:
            print(f"no dead letter has the id '{printable(task_id)}'")
        if len(missing) > SHOWN_MOST:
            print(f"... and {len(missing) - SHOWN_MOST:,} more id(s) no dead letter has "
                  f"(--json lists each)")
    return 1 if missing else 0


def _cut(text: str, width: int) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[:width - 3] + "..."
