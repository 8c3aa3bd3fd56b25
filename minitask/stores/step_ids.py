"""Task ids a new workflow may not give its steps: ids a workflow step took already.

A workflow step is sent only if its marker (``once:<id>``, see ``stores.workflows``)
does not exist, so that a step run twice never sends what follows it twice. The
marker outlives the step's run, as long as its result. An explicit ``task_id``
that a step of an earlier workflow took, while that marker lives, would never be
sent in a new one: its group would never fill, and the chord body (or the group's
next step) waiting for it would stay pending for ever. ``canvas`` refuses such ids
at ``delay()``, naming them.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from ..broker.keys import queue_keys
from ..broker.transport import Transport
from ..errors import ConfigurationError
from ..printable import own_logger
from .foreign import raise_refusals

logger = own_logger(__name__)


def taken_by_steps(transport: Transport, app_name: str,
                   tasks: Sequence[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """The ``(queue, task id)`` of ``tasks`` that a workflow step took already (its
    marker exists), in one round trip. A marker key of another type is none of
    minitask's: left to the workflow's script, which refuses it naming the key.

    Raises:
        BrokerError: Redis could not be reached, or refused the read.
    """
    if not tasks:
        return []
    with transport.errors(f"read the workflow step markers of {len(tasks)} task id(s)"):
        pipe = transport.client.pipeline(transaction=False)
        for queue, task_id in tasks:
            pipe.hexists(queue_keys(app_name, queue).once(task_id), "state")
        found = pipe.execute(raise_on_error=False)
        raise_refusals(found)
    return [task for task, marked in zip(tasks, found) if marked is True]


def refuse_taken_by_steps(transport: Transport, app_name: str,
                          tasks: Sequence[Tuple[str, str]], workflow: object) -> None:
    """Refuse the explicit ids ``tasks`` of ``workflow`` (its repr names it in the
    error, made only then: a deep one's is costly) that a workflow step took already
    (``taken_by_steps``).

    Raises:
        ConfigurationError: naming the ids; nothing was sent.
        BrokerError: Redis could not be reached.
    """
    taken = taken_by_steps(transport, app_name, tasks)
    if taken:  # its group would never fill, what waits for it never run
        named = ", ".join(repr(task_id) for _, task_id in taken)
        raise ConfigurationError(
            f"workflow {workflow!r}: the task id(s) {named} were taken by a step of an "
            f"earlier workflow (its marker lives as long as its result): such a step would "
            f"never be sent, and what waits for it would stay pending for ever: choose "
            f"other ids")
