"""Carrying workflows on: the worker's part in chains, groups and chords.

Called by the ``Recorder`` when a task ends for good, *before* its own outcome
is recorded: if the worker dies in between, the task is delivered again and
the workflow step is redone, every part of it idempotent
(``stores/workflows.py`` says how). Recorded the other way round, a crash
after the ack would lose the rest of the workflow for good.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Optional

from ..errors import BrokerError, DecodeError
from ..printable import error_text, log_error, own_logger, printable
from ..stores.foreign import foreign
from ..stores.workflow_reads import Failure, frame_of
from ..wire.message import Message, Outcome
from .acl_steps import WorkflowStepRefused, refusal_of
from .host import Host
from .outages import RefusedTooLong, persist

logger = own_logger(__name__)


class WorkflowSteps:
    """What a worker does for the workflow around a task that ended."""

    def __init__(self, host: Host) -> None:
        self._host = host

    @staticmethod
    def check(message: Message) -> None:
        """Raise DecodeError unless the message's workflow frame, if it has one, is one
        minitask writes: read as the message is decoded, so that a task whose workflow
        cannot go on is dead-lettered before it runs, never after."""
        frame_of(message)

    def succeeded(self, message: Message, value: Any) -> Optional[BaseException]:
        """Send what follows a task that succeeded; through Redis outages, since the
        task's outcome waits for it.

        Returns:
            None, or the error that makes the task dead instead: its result cannot
            go on (a message over the limit, an unreadable frame or group state, or
            any other error its workflow's walk raised).
        """
        if message.workflow is None:
            return None
        try:
            frame = frame_of(message)
        except DecodeError as exc:
            return exc
        assert frame is not None
        store = self._host.broker.workflows
        clock = self._host.clock
        try:
            persist(lambda: _unless_foreign(lambda: store.advance(frame, value, clock.now_ms())),
                    f"carry on the workflow of task {message.id}",
                    refused_for=self._host.visibility_timeout)
        except RefusedTooLong as exc:  # dead, its workflow held: requeued, it goes on
            return self._refused(message, frame, exc)
        except Exception as exc:  # EncodeError, MessageTooLarge, DecodeError; or state
            return exc  # no check foresaw (a RecursionError, say): dead, never held
        return None

    def ended_dead(self, message: Optional[Message], outcome: Outcome) -> None:
        """Run the error callbacks of a task that ended dead, fail its group and
        cancel what would have followed it; through Redis outages."""
        if message is not None:
            self._ended(message, "fail", Failure(message.id, message.task, outcome.exc_type,
                                                 outcome.message, outcome.traceback))

    def cancelled(self, message: Message, outcome: Outcome) -> None:
        """Cancel what would have followed a task stopped while running, and fail its
        group, saying the task was cancelled; through Redis outages."""
        self._ended(message, "stopped", Failure(message.id, message.task, "Cancelled",
                                                outcome.message, ""))

    def _ended(self, message: Message, how: str, failure: Failure) -> None:
        """The workflow around a task that will not succeed: ``how`` is the store's
        ``fail`` (it ended dead: error callbacks run) or ``stopped`` (cancelled)."""
        if message.workflow is None:
            return
        try:
            frame = frame_of(message)
        except DecodeError as exc:
            logger.error("task %s: its workflow cannot be carried on: %s", message.id, exc)
            return
        assert frame is not None
        store = self._host.broker.workflows
        step = store.fail if how == "fail" else store.stopped
        clock = self._host.clock
        try:
            persist(lambda: _unless_foreign(lambda: step(frame, failure, clock.now_ms())),
                    f"{'fail' if how == 'fail' else 'cancel'} the workflow of task {message.id}",
                    refused_for=self._host.visibility_timeout)
        except DecodeError as exc:
            logger.error("task %s: its workflow state cannot be read: %s", message.id, exc)
        except RefusedTooLong as exc:  # its own outcome is recorded all the same
            logger.error("task %s: its workflow cannot be carried on: %s; its own outcome "
                         "is recorded", message.id, self._refused(message, frame, exc, False))
        except Exception as exc:  # state no check foresaw (a RecursionError, say): the
            # task's own outcome is recorded all the same, never held for ever or retried
            log_error(logger, logging.ERROR, "task %s: its workflow cannot be carried on "
                      "(internal error: %s: %s); its own outcome is recorded", message.id,
                      type(exc).__name__, error_text(exc), error=exc)

    def _refused(self, message: Message, frame: Dict[str, Any], refused: RefusedTooLong,
                 held: bool = True) -> WorkflowStepRefused:
        """The error of a step Redis's ACL refused for ``visibility_timeout`` (the
        task's slot is not held for ever), naming the step, queue, key and ACL user."""
        return WorkflowStepRefused(refusal_of(self._host.broker, message.id, frame.get("next"),
                                              refused.bound, refused.error, held))


def _unless_foreign(step: Callable[[], Any]) -> Any:
    """Run a workflow step; Redis refusing data minitask did not write (a group or a
    marker of another type) is a DecodeError: waiting cannot end it, so the task is
    dead-lettered, naming the key, instead of holding its worker's slot for ever."""
    try:
        return step()
    except BrokerError as exc:
        if not foreign(exc):
            raise
        raise DecodeError(f"workflow state in Redis that minitask did not write: "
                          f"{printable(exc)}") from exc
