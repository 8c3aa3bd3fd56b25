"""The app's methods for operators: schedules, subscribers, dead letters and the
groups of fair queues.

``Minitask`` inherits them; each is a short door into the admin functions,
which the CLI and the dashboard call too, so the app, the command line and the
pages always act alike.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

from ..broadcast import Subscriber
from ..periodic import Schedule
from ..task import Task
from . import dead as _dead, groups as _groups, scheduling as _scheduling
from . import subscriptions as _subscriptions
from .dead import DeadTask
from .operated import Operated


class Operations:
    """Operator actions as methods of the app (a mixin of ``Minitask``)."""

    def add_schedule(self: Operated, name: str, task: Union[Task[Any, Any], str], *,
                     cron: Optional[str] = None, every: Optional[float] = None,
                     tz: str = "UTC", args: Sequence[Any] = (),
                     kwargs: Optional[Dict[str, Any]] = None, catch_up: str = "latest",
                     overlap: bool = True, queue: Optional[str] = None,
                     priority: Optional[int] = None) -> Schedule:
        """Add or replace a schedule at run time, for every worker of the app.

        Workers serving its queue pick it up within one tick; a schedule of the
        same name (on any queue) is replaced. The options are those of
        ``periodic``; ``queue`` and ``priority`` override the task's.

        Args:
            name: the schedule's name.
            task: the task, or its registered name.
            cron: a 5-field cron expression, read in ``tz``.
            every: seconds between ticks.
            tz: IANA time zone of ``cron``.
            args: positional arguments of each run.
            kwargs: keyword arguments of each run.
            catch_up: ``"latest"`` or ``"skip"``.
            overlap: False skips a tick while the last run is pending.
            queue: the queue of the runs (default: the task's).
            priority: the priority of the runs (default: the task's).

        Returns:
            The schedule as stored, with ``next_at``.

        Raises:
            ConfigurationError: a bad option or queue, or a task name this app does
                not know (a ValueError).
            ArgumentError: ``args``/``kwargs`` do not fit the task (a TypeError).
            EncodeError: an argument msgpack cannot carry (a TypeError).
            BrokerError: Redis could not be reached.

            Each starts with the schedule's name: ``schedule 'nightly-42': ...``.
        """
        return _scheduling.add_schedule(self, name, task, cron=cron, every=every, tz=tz,
                                        args=args, kwargs=kwargs, catch_up=catch_up,
                                        overlap=overlap, queue=queue, priority=priority)

    def remove_schedule(self: Operated, name: str) -> bool:
        """Stop a schedule for every worker; runs already enqueued still run.

        A decorated schedule comes back when a worker of code that still has
        the decorator starts (running workers do not write it back, as they
        write back one whose record Redis lost).

        Args:
            name: the schedule's name.

        Returns:
            False when no schedule has this name.

        Raises:
            ConfigurationError: ``name`` is not a non-empty str.
            BrokerError: Redis could not be reached.
        """
        return _scheduling.remove_schedule(self, name)

    def schedules(self: Operated) -> List[Schedule]:
        """Every schedule of the app, by name, with its next and last tick.

        Returns:
            ``Schedule`` objects, sorted by name.

        Raises:
            BrokerError: Redis could not be reached.
        """
        return _scheduling.schedules(self)

    def subscribers(self: Operated, queue: str) -> List[Subscriber]:
        """The subscribers of a queue's broadcast calls, by name, with their lag.

        Args:
            queue: the broadcast queue.

        Returns:
            ``Subscriber`` objects (``name``, ``lag``, ``last_seen``).

        Raises:
            ConfigurationError: a bad queue name.
            BrokerError: Redis could not be reached.
        """
        return _subscriptions.subscribers(self, queue)

    def unsubscribe(self: Operated, queue: str, name: str) -> bool:
        """Remove a subscriber gone for good (``minitask unsubscribe``).

        Calls stop waiting for it; a worker of that name still running
        subscribes again.

        Args:
            queue: the broadcast queue.
            name: the subscriber (worker) name.

        Returns:
            False when ``name`` was not a subscriber of ``queue``.

        Raises:
            ConfigurationError: a bad queue or subscriber name.
            BrokerError: Redis could not be reached.
        """
        return _subscriptions.unsubscribe(self, queue, name)

    def dead_letters(self: Operated, queue: Optional[str] = None, *,
                     limit: int = 1000) -> List[DeadTask]:
        """Tasks that will not run again, oldest first.

        Args:
            queue: only this queue; default: every queue of the app.
            limit: at most this many per queue.

        Returns:
            ``DeadTask`` objects, with arguments, reason, error and traceback.

        Raises:
            ConfigurationError: ``queue`` is no queue of the app (it declares or
                has used, or a broadcast lane of one), naming it.
            BrokerError: Redis could not be reached.
        """
        return _dead.dead_letters(self, queue, limit=limit)

    def requeue_dead(self: Operated, task_id: str) -> bool:
        """Put a dead task back at the tail of its queue, as a first attempt.

        Args:
            task_id: the dead task's id.

        Returns:
            False when no dead letter has this id, or its message is gone (nothing
            would run) or cannot be decoded (a worker would dead-letter it again;
            one written by a newer minitask is requeued as it is): nothing is
            written and it stays, for ``purge_dead``.

        Raises:
            BrokerError: Redis could not be reached, or refused the call: a key of
                the letter's queue holds another type (named; nothing is written).
        """
        return _dead.requeue_dead(self, task_id)

    def purge_dead(self: Operated, task_id: Optional[str] = None, *,
                   queue: Optional[str] = None) -> int:
        """Delete dead letters for good: one by id, or all (of one queue).

        Args:
            task_id: the one to delete; None deletes every dead letter (of ``queue``).
            queue: only this queue's.

        Returns:
            How many were deleted.

        Raises:
            ConfigurationError: ``queue`` is no queue of the app (it declares or
                has used, or a broadcast lane of one), naming it: a mistyped one
                would delete nothing and say 0.
            BrokerError: Redis could not be reached.
        """
        return _dead.purge_dead(self, task_id, queue=queue)

    def set_group_weight(self: Operated, queue: str, group: Union[str, int],
                         weight: int) -> None:
        """Give a group of a fair queue ``weight`` fetches per turn.

        Groups take turns; a group of weight 3 gets three fetches per turn where
        one of weight 1 gets one. The weight stays until set to 1 again.

        Args:
            queue: the queue.
            group: the group (an int is stored as its decimal digits).
            weight: fetches per turn, from 1 (the default).

        Raises:
            ConfigurationError: a bad queue, group or weight, or a queue the app
                has not (declares or has used) (a ValueError).
            BrokerError: Redis could not be reached, or (``reason`` "wrong type") the
                key of the groups' weights holds another type (named; nothing changed).
        """
        _groups.set_group_weight(self, queue, group, weight)

    def pause_group(self: Operated, queue: str, group: Union[str, int]) -> None:
        """Hold one group's ready tasks; other groups run on.

        Running tasks finish; tasks of the group wait, in order, until
        ``resume_group``. The pause stays until then, even while the group
        has no task.

        Args:
            queue: the queue.
            group: the group.

        Raises:
            ConfigurationError: a bad queue or group, or a queue the app has
                not (declares or has used) (a ValueError).
            BrokerError: Redis could not be reached.
        """
        _groups.pause_group(self, queue, group)

    def resume_group(self: Operated, queue: str, group: Union[str, int]) -> bool:
        """Serve a group paused by ``pause_group`` again.

        Args:
            queue: the queue.
            group: the group.

        Returns:
            False when the group was not paused.

        Raises:
            ConfigurationError: a bad queue or group, or a queue the app has
                not (declares or has used) (a ValueError).
            BrokerError: Redis could not be reached.
        """
        return _groups.resume_group(self, queue, group)
