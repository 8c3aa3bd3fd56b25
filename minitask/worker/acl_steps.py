"""A worker's Redis ACL user and the queues it sends to without serving them.

A task's success sends its workflow's next step, or its own ``delay()``, to any queue
of the app, not only to those its worker serves. An ACL user whose key patterns
cover the served queues alone (``~minitask:{app:default}:*``) passed the worker's
start check (worker/acl_start.py asks on one key per node), then every
ack carrying a chain on to another queue was refused (NOPERM) and retried for ever:
the task stayed leased and, with ``-c 1``, the whole queue stalled (issue 29). So:

* at start (``check_queue_keys``), the worker also asks about the keys of each
  queue it serves and every other queue the app's tasks and routes declare, and says those its user
  may not write in ONE warning (a worker narrowed to its own queues still starts);
  a served queue refused stops it (exit 2, as the check of acl_start does);
* at run time, an outcome write the ACL refuses is retried for ``visibility_timeout``
  at most (``persist``: a refusal restored within it goes unnoticed), then given up
  (``RefusedTooLong``). A workflow's next step so refused has its task dead-lettered
  with ``WorkflowStepRefused`` (``refusal_of``), naming the step, the queue, the key
  and the ACL user; its workflow is held, neither failed nor carried on: requeued
  once the ACL is fixed, the task runs again and carries it on. Any other outcome
  write so refused (an ack, a retry, a dead letter, a cancel: nothing could be
  written) frees the task's slot, and its lease, no longer renewed, expires: the task
  is delivered again, never lost (``released_said``: one ERROR, naming the problem).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..broker.acl_check import missing_of, sender_commands
from ..errors import BrokerError, ConfigurationError, MinitaskError
from ..printable import cut_text, own_logger, printable

logger = own_logger(__name__)

#: Why a task whose workflow's next step the ACL refused is dead (its outcome's reason).
HELD_REASON = "its workflow's next step refused by the Redis ACL"
#: Steps a refusal names at most (a group of 1,000 members is not listed whole).
STEPS_NAMED = 5
#: Queues the start-up warning names at most.
QUEUES_NAMED = 20


class WorkflowStepRefused(MinitaskError):
    """Redis's ACL refused to send a workflow's next step for longer than the bound:
    the task that ran before it is dead-lettered, its workflow held for a requeue."""


def next_steps(follow: Optional[Dict[str, Any]]) -> List[Tuple[str, str, str]]:
    """The first steps a frame's continuation (``follow``) sends, as (what, id, queue):
    a task's name, or "group" for the chord or group a member joins."""
    if follow is None:
        return []
    if follow.get("k") == "join":
        return [("group", str(follow.get("id")), str(follow.get("q")))]
    return _firsts(follow.get("node") or {})


def _firsts(node: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    kind = node.get("k")
    if kind == "t":
        return [(str(node.get("task")), str(node.get("id")), str(node.get("q")))]
    if kind == "c":
        steps = node.get("steps") or []
        return _firsts(steps[0]) if steps else []
    members = node.get("members" if kind == "g" else "header") or []
    return [step for member in members for step in _firsts(member)]


def acl_user(client: Any) -> str:
    """The ACL user ``client`` logs in as: its URL's user, else Redis's "default"."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:  # Redis Cluster: its nodes'
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", {})
    return str(kwargs.get("username") or "default")


def refused_on(broker: Any, queue: str, task_id: Optional[str] = None) -> Optional[str]:
    """What the ACL user may not do on ``queue``'s keys ("use key K (add ~P)", "run
    CMD on key K (add +cmd)"), asked of Redis (7.0 and later) as a send's check asks,
    on its messages key, else on the result key of task ``task_id``; None: nothing
    refused, or Redis cannot say."""
    transport = broker.transport
    keys = broker.queues.keys(queue)
    key = keys.messages
    if task_id is not None:  # its messages key first, asked once
        refused = refused_on(broker, queue)
        if refused is not None:
            return refused
        key = keys.result(task_id)
    asked = sender_commands(transport.sources)
    try:
        with transport.errors(f"ask Redis whether the ACL user may write the keys of "
                              f"queue {queue!r}"):
            missing = missing_of(transport.client, asked, key)
    except BrokerError as exc:  # the check's own EVALSHA refused the key: none covers it
        if exc.reason != "permission" or "keys" not in str(exc.__cause__ or ""):
            raise
        missing = list(asked)
    if not missing:
        return None
    if len(missing) == len(asked):  # no command on the key: no key pattern covers it
        return (f"use key {key!r} (no key pattern of the user covers it: add "
                f"~{keys.base}* or ~minitask:*)")
    return (f"run {', '.join(name.upper() for name in missing)} on key {key!r} "
            f"(add {' '.join('+' + name for name in missing)})")


def refusal_of(broker: Any, task_id: str, follow: Optional[Dict[str, Any]],
               bound: float, exc: BrokerError, held: bool = True) -> str:
    """Why task ``task_id`` is dead (``held``; else why its workflow was not failed or
    cancelled): Redis refused its workflow's next steps (``follow``) for ``bound``
    seconds; which steps, queues and keys, the ACL user, and what to do."""
    steps = next_steps(follow)
    named = ", ".join(f"{printable(what)} (id {printable(step_id)}) to queue "
                      f"{printable(queue)!r}" for what, step_id, queue in steps[:STEPS_NAMED])
    more = f" and {len(steps) - STEPS_NAMED} more" if len(steps) > STEPS_NAMED else ""
    user = acl_user(broker.transport.client)
    said: List[str] = []
    for queue in sorted({queue for _, _, queue in steps}):
        try:
            refused = refused_on(broker, queue)
        except (BrokerError, ValueError):  # not asked: Redis's own words say it
            refused = None
        if refused is not None:
            said.append(f"on queue {printable(queue)!r} it may not {refused}")
    why = "; ".join(said) if said else f"Redis said: {cut_text(printable(str(exc)), 500)}"
    then = (f"its workflow is held (neither failed nor carried on): once the user's ACL "
            f"is fixed, requeue this task (minitask dead requeue -A APP "
            f"{printable(task_id)}): it runs again and carries its workflow on" if held else
            "what follows it was neither failed nor cancelled (its error callbacks did not "
            "run): it waits, unsent")
    return (f"Redis's ACL refused, for {bound:.0f} s (visibility_timeout), to write the "
            f"next step(s) of the workflow of task {printable(task_id)}: {named or '?'}"
            f"{more}: ACL user {user!r}: {why}; {then}")


def check_queue_keys(worker: Any) -> None:
    """Ask Redis whether the worker's ACL user may write the keys of each queue of the
    app (its tasks' and routes') and each it serves: a served queue refused stops the
    start (ConfigurationError: exit 2; the start check of acl_start asks on one key per
    node, not every queue's); the others refused are said in one WARNING: a workflow
    step or a ``delay()`` sent there from one of its tasks would be refused. Nothing is
    said where Redis cannot be asked (before 7.0: acl_start says so)."""
    served = list(worker.queues)
    others = [queue for queue in worker.app.worker_queues() if queue not in served]
    refused: List[Tuple[str, str]] = []
    try:
        for queue in [*served, *others]:
            why = refused_on(worker.broker, queue)
            if why is not None:
                refused.append((queue, why))
    except BrokerError as exc:
        logger.warning("worker %s could not ask Redis whether its ACL user may write the "
                       "keys of each of the app's queues: %s", worker.name, exc)
        return
    user = acl_user(worker.broker.transport.client)
    own = [(queue, why) for queue, why in refused if queue in served]
    if own:
        whys = "; ".join(f"on {queue!r} it may not {why}" for queue, why in own)
        raise ConfigurationError(
            f"worker {worker.name} cannot start: its Redis ACL user {user!r} may not "
            f"write the keys of queue(s) it serves: {whys}; the worker leased nothing")
    if refused:
        logger.warning("%s", unreachable_said(worker.name, user, refused,
                                              worker.app.visibility_timeout))


def unreachable_said(worker: str, user: str, refused: Sequence[Tuple[str, str]],
                     bound: float) -> str:
    """The start-up warning of ``warn_unreachable_queues``."""
    shown = refused[:QUEUES_NAMED]
    more = f" (and {len(refused) - QUEUES_NAMED} more)" if len(refused) > QUEUES_NAMED else ""
    queues = ", ".join(repr(queue) for queue, _ in shown)
    whys = "; ".join(f"on {queue!r} it may not {why}" for queue, why in shown)
    return (f"worker {worker}: its Redis ACL user {user!r} may not write the keys of "
            f"queue(s) {queues}{more}, which this app's tasks declare but this worker does "
            f"not serve: {whys}. A workflow step or a delay() sent there from a task of "
            f"this worker is refused: a workflow's next step is retried for "
            f"{bound:.0f} s (visibility_timeout), then the task that ran is dead-lettered "
            f"(requeue it once the ACL is fixed). Widen the user's key patterns if tasks "
            f"send there; the worker starts all the same")


def released_said(broker: Any, queue: str, task_id: str, what: str, bound: float,
                  exc: BrokerError) -> str:
    """The ERROR of an outcome write Redis's ACL refused for ``bound`` seconds, given
    up: what was refused, the ACL user, what it may not do on ``queue`` (its keys, or
    task ``task_id``'s result key; else Redis's own words), and what becomes of it."""
    try:
        refused = refused_on(broker, queue, task_id)
    except (BrokerError, ValueError):
        refused = None
    why = (f"on queue {printable(queue)!r} it may not {refused}" if refused is not None
           else f"Redis said: {cut_text(printable(str(exc)), 500)}")
    return (f"could not {what}: Redis's ACL refused it for {bound:.0f} s "
            f"(visibility_timeout): ACL user {acl_user(broker.transport.client)!r}: {why}; "
            f"given up: the worker frees the task's slot and no longer renews its lease; "
            f"the task is delivered again once the lease expires (fix the user's ACL: "
            f"until then it is refused again each time)")
