"""The dashboard's actions, the CLI's own: cancel a task that has not started
(``minitask cancel``), stop one that runs (``minitask cancel --running``),
requeue or purge a dead letter (``minitask dead requeue|purge``), delete the
ready tasks of a queue (``minitask purge``).

Each is a POST to ``/actions/<name>`` and takes two steps. The web module
checks the CSRF token (and the Origin) of every POST before it gets here. The
first POST changes nothing: it answers with a page that says what the action
will do, now, to what, and a form (the same token) to confirm it. Only a POST
with ``confirm=yes`` acts; it then redirects to the page it came from
(``back``, a path of this site) with a notice. The confirmation is a page, not
a ``confirm()`` dialog: the Content-Security-Policy runs no inline script, and
an operator without JavaScript gets the same question. The paths older pages
posted to (``FORMER``) are the actions they name, and ask first too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple
from urllib.parse import quote, urlsplit

from ..admin import (NOT_DEAD, REQUEUED, REQUEUED_UNCONFIRMED, dead_queue, known_queue,
                     purge_ready, queue_counts, revive_or_refusal)
from ..app import Minitask
from ..errors import ConfigurationError
from ..printable import own_logger

logger = own_logger(__name__)

Form = Dict[str, List[str]]
Reply = Tuple[str, List[Tuple[str, str]], bytes]
#: The form fields a confirmation carries on (no other field is echoed back).
CARRIED = ("task_id", "running", "queue", "back")


class Refused(Exception):
    """The action's input is wrong (400): no such queue, no task named."""


@dataclass(frozen=True)
class Action:
    """``ask`` says what the action will do (the confirmation's text); ``act`` does
    it and says what it did (the notice)."""

    title: str
    ask: Callable[[Minitask, Form], str]
    act: Callable[[Minitask, Form], str]


def _field(form: Form, name: str) -> str:
    return (form.get(name) or [""])[0].strip()


def _task_id(form: Form) -> str:
    task_id = _field(form, "task_id")
    if not task_id:
        raise Refused("name the task: the form has no task_id")
    return task_id


def _queue(app: Minitask, form: Form, known: bool = True) -> str:
    """The form's queue, as ``checked_queue`` takes it."""
    return checked_queue(app, _field(form, "queue"), known)


def checked_queue(app: Minitask, queue: str, known: bool = True) -> str:
    """``queue`` if it is one of the app's (``known``), else a valid name or a broadcast
    lane's ``queue:subscriber``, as the dead-letter page lists them; Refused if not."""
    try:
        if known:  # as the CLI and the API check it (one round trip, any registry size)
            return known_queue(app, queue, "")
        for part in queue.split(":", 1):
            app.check_queue_name(part)
    except ValueError as exc:
        raise Refused(str(exc)) from exc
    return queue


def _stop(form: Form) -> bool:
    return _field(form, "running") in ("1", "yes", "true")


# -- cancel (queued, scheduled, or with running=1 running) ---------------------

def _ask_cancel(app: Minitask, form: Form) -> str:
    task_id = _task_id(form)
    status = app.handle(task_id).status()
    if status == "unknown":  # cancel does nothing to an id the app does not know
        return (f"Task {task_id} is unknown to app {app.name!r} (never sent, or expired "
                f"with its results): there is nothing to cancel, and confirming changes "
                f"nothing.")
    if _stop(form):
        return (f"Task {task_id} is {status}. If it runs, its worker stops it (the process "
                f"pool kills the attempt's child, the asyncio pool cancels its coroutine, "
                f"the thread pool sets cancel_requested); if it has not started it never "
                f"will. It ends cancelled, never retried.")
    return (f"Task {task_id} is {status}. If it has not started, it is withdrawn and never "
            f"runs; a running task is left alone.")


def _cancel(app: Minitask, form: Form) -> str:
    """As ``minitask cancel [--running] ID``."""
    task_id = _task_id(form)
    handle = app.handle(task_id)
    asked = handle.cancel(running=_stop(form))
    status = handle.status()
    if asked and status == "running":
        return f"{task_id} is running; asked its worker to stop it"
    if status == "cancelled":
        return f"cancelled {task_id}" if asked else f"{task_id} was cancelled already"
    if status == "running":
        return f"{task_id} not cancelled: it is running (stop it instead)"
    return f"{task_id} not cancelled: it is {status}"


# -- dead letters ----------------------------------------------------------------

def _ask_requeue(app: Minitask, form: Form) -> str:
    task_id = _task_id(form)
    if dead_queue(app, task_id) is None:
        return _no_dead_letter(task_id, "requeue")
    return f"Dead letter {task_id} goes back to the tail of its queue and runs again."


def _no_dead_letter(task_id: str, what: str) -> str:
    """The question for an id that is no dead letter: true, and says the act does nothing."""
    return (f"{task_id} is no dead letter (of the queues a lookup asks): there is nothing "
            f"to {what}, and confirming changes nothing.")


def _requeue(app: Minitask, form: Form) -> str:
    task_id = _task_id(form)
    queue = dead_queue(app, task_id)
    # Redis refusing this letter's call (a key of another type) is a notice naming the
    # key, as the CLI's, not a page that says the dashboard is unavailable
    answer = NOT_DEAD if queue is None else revive_or_refusal(app, queue, task_id)
    if answer in (REQUEUED, REQUEUED_UNCONFIRMED):
        unsure = " (unconfirmed by replicas: may not survive a failover)" * (
            answer == REQUEUED_UNCONFIRMED)
        return f"requeued {task_id}{unsure}"
    return f"{task_id} is no dead letter" if answer == NOT_DEAD else (
        f"dead letter {task_id} is not requeued: {answer}")


def _ask_purge_dead(app: Minitask, form: Form) -> str:
    if _field(form, "task_id"):
        task_id = _task_id(form)
        if dead_queue(app, task_id) is None:
            return _no_dead_letter(task_id, "purge")
        return f"Dead letter {task_id} is deleted for good; its status becomes unknown."
    queue = _queue(app, form, known=False)
    return (f"All {queue_counts(app, queue)['dead']} dead letter(s) of queue {queue!r} are "
            f"deleted for good.")


def _purge_dead(app: Minitask, form: Form) -> str:
    if _field(form, "task_id"):
        count = app.purge_dead(_task_id(form))
    else:
        count = app.purge_dead(queue=_queue(app, form, known=False))
    return f"purged {count} dead letter(s)"


# -- a queue's ready tasks -------------------------------------------------------

def _ask_purge(app: Minitask, form: Form) -> str:
    queue = _queue(app, form)
    return (f"The {queue_counts(app, queue)['ready']} ready task(s) of queue {queue!r} are "
            f"deleted for good; scheduled, running and dead ones stay.")


def _purge(app: Minitask, form: Form) -> str:
    """As ``minitask purge QUEUE``."""
    queue = _queue(app, form)
    return f"deleted {purge_ready(app, queue)} ready task(s) from queue {queue!r}"


#: The actions by their path.
ACTIONS: Dict[str, Action] = {
    "actions/cancel": Action("Cancel the task", _ask_cancel, _cancel),
    "actions/requeue": Action("Requeue the dead letter", _ask_requeue, _requeue),
    "actions/purge-dead": Action("Purge dead letters", _ask_purge_dead, _purge_dead),
    "actions/purge": Action("Delete the ready tasks", _ask_purge, _purge),
}
#: Paths older dashboards posted to, each the action it names now (and so asking first);
#: an old page's form went back to the dead-letter page.
FORMER = {"dead/requeue": "actions/requeue", "dead/purge": "actions/purge-dead"}


def back_to(form: Form) -> str:
    """The page to go back to: a path of this site (never another site's), or /."""
    given = _field(form, "back")
    parts = urlsplit(given)
    if (parts.scheme or parts.netloc or not parts.path.startswith("/")
            or parts.path.startswith("//") or "\\" in given):
        return "/"
    return quote(parts.path, safe="/%")


def perform(app: Minitask, path: str, form: Form,
            render: Callable[[str, object], bytes],
            keep_notice: Callable[[str], str]) -> Optional[Reply]:
    """Answer the POST to ``path`` (its CSRF token already checked); None when no
    action has that path. ``render(template, data)`` renders a page;
    ``keep_notice(text)`` keeps the notice and returns its token."""
    if path in FORMER:
        path = FORMER[path]
        form = {"back": ["/dead"], **form}
    action = ACTIONS.get(path)
    if action is None:
        return None
    back = back_to(form)
    try:
        if _field(form, "confirm") != "yes":
            question = action.ask(app, form)
            fields = [(name, _field(form, name)) for name in CARRIED if _field(form, name)]
            title = "Stop the task" if action.act is _cancel and _stop(form) else action.title
            page = render("confirm.html", {"title": title, "question": question,
                                           "path": path, "fields": fields, "back": back})
            return "200 OK", [("Content-Type", "text/html; charset=utf-8")], page
        notice = action.act(app, form)
    except (Refused, ConfigurationError) as exc:  # the form's input (a task_id with ESC)
        return "400 Bad Request", [("Content-Type", "text/plain; charset=utf-8")], (
            str(exc).encode())
    logger.info("dashboard: %s", notice)
    location = f"{back}?notice={keep_notice(notice)}"
    return "303 See Other", [("Location", location), ("Content-Type", "text/plain")], b""
