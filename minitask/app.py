"""Minitask: the application object users create and decorate tasks with."""
from __future__ import annotations

import asyncio
import inspect
import weakref
from typing import (Any, Callable, ContextManager, Coroutine, Dict, List, Optional, Sequence,
                    Union, overload)

from .admin.methods import Operations
from .batching import Batch
from .broadcast import broadcast_limits
from .broker.connection import Client, connect
from .broker.durability import Durability, check_socket_timeout
from .errors import ConfigurationError, DuplicateTaskError
from .groups import HandleLookups
from .hooks import Hook, Hooks
from .options import (TaskOptions, check_clock, check_name_size, check_positive_seconds,
                      check_seconds)
from .periodic import Schedule, build as build_schedule
from .routes import ByName, Routes, SendByName
from .sending import Sender, check_key_part, check_queue_name
from .stores.aio import AsyncBroker, async_client_for, check_async_client, running_loop
from .stores.broker import Broker, Connected, keep_broker, made_broker
from .stores.dead import dead_letter_bounds
from .stores.recent import DEFAULT_LENGTH, MAX_LENGTH
from .task import AsyncTask, P, R, Task, TaskDecorator
from .wire.message import SystemClock
from .worker import Worker, check_prefetch
from .worker.served import served_queues

#: Upper bounds that catch a unit mistake (bytes for KiB, a timestamp for a count).
MAX_DELIVERIES = 1000
MAX_MESSAGE_BYTES = 512 * 1024 * 1024  # Redis's own limit for one string

APP_OPTIONS = frozenset({"clock", "prefetch", "async_broker", "broadcast_ttl",
                         "broadcast_maxlen", "durability", "min_replicas",
                         "durability_timeout", "routes", "recent_outcomes",
                         "max_result_bytes", "dead_letters_max", "dead_letters_ttl"})


class Minitask(Operations, SendByName, HandleLookups):
    """An application: a name that namespaces its Redis keys, and its tasks.

    Args:
        name: namespaces every Redis key of the app.
        broker: a URL (``redis://``, ``rediss://``, ``unix://``,
            ``redis+sentinel://``, ``redis+cluster://``, ``embedded://``) or a
            ready ``redis.Redis`` client; default: ``MINITASK_BROKER_URL``,
            else the embedded development broker.
        default_queue: queue of tasks that do not name one.
        result_ttl: seconds results are kept.
        visibility_timeout: seconds a lease lasts unless its worker renews it;
            a crashed worker's tasks run again after about this long.
        max_deliveries: deliveries that end with the worker dying before a
            task is dead-lettered as poison.
        max_message_bytes: largest encoded message accepted at enqueue.
        **options: ``prefetch`` (tasks a worker process leases per round
            trip, 1 to 1000, default 1: strict priority and queue order; more
            is faster but lets up to that many tasks jump ahead of a
            higher-priority one), ``clock`` (an object with ``now_ms()``,
            for tests), ``broadcast_ttl`` (seconds a broadcast call waits for a
            subscriber to pull it, default one day), ``broadcast_maxlen``
            (calls of a queue kept for subscribers that have not pulled them,
            default 10,000; older ones are dropped) and ``durability`` (None,
            "replicated" or "fsync": whether enqueues and outcomes wait for
            ``min_replicas`` replicas, default 1, to confirm them within
            ``durability_timeout`` seconds, default 1.0; see
            :doc:`/guide/durability`), ``routes`` (task names or glob
            patterns mapped to a ``queue`` and a ``priority``; the first
            match wins; see :doc:`/guide/routing`), ``recent_outcomes``
            (outcomes each queue's record keeps for ``minitask inspect recent``,
            default 2,000, 0 to keep none; see :doc:`/guide/operations`),
            ``max_result_bytes`` (the largest encoded result a worker records,
            default ``max_message_bytes``: a larger return value fails its attempt
            with ``ResultTooLarge``), ``dead_letters_max`` and ``dead_letters_ttl``
            (dead letters kept per queue, default 10,000; seconds kept, default 180
            days, None: no limit; see :doc:`/guide/retries`).

    Raises:
        ConfigurationError: an option is invalid or unknown. No I/O happens here.
    """

    def __init__(self, name: str, broker: Union[str, Client, None] = None, *,
                 default_queue: str = "default", result_ttl: float = 86400,
                 visibility_timeout: float = 30.0, max_deliveries: int = 5,
                 max_message_bytes: int = 1_048_576, **options: Any) -> None:
        _check_known(name, options)
        check_key_part("app", name)
        check_queue_name(default_queue)
        where = f"app {name!r}"
        if check_seconds(visibility_timeout, "visibility_timeout", where) < 1:
            raise ConfigurationError(f"{where}: visibility_timeout must be at least 1 "
                                     f"second, got {visibility_timeout!r}")
        check_positive_seconds(result_ttl, "result_ttl", where)
        _check_count(max_deliveries, "max_deliveries", where, MAX_DELIVERIES)
        _check_count(max_message_bytes, "max_message_bytes", where, MAX_MESSAGE_BYTES)
        max_result_bytes = options.get("max_result_bytes", max_message_bytes)
        _check_count(max_result_bytes, "max_result_bytes", where, MAX_MESSAGE_BYTES)
        prefetch = check_prefetch(options.get("prefetch", 1), f"app {name!r}")
        self.name = name
        self.default_queue = default_queue
        self.result_ttl = float(result_ttl)
        self.visibility_timeout = float(visibility_timeout)
        self.max_deliveries = max_deliveries
        self.max_message_bytes = max_message_bytes
        #: The largest encoded result a worker records (a larger one fails its attempt).
        self.max_result_bytes: int = max_result_bytes
        #: Whether the app named ``max_result_bytes`` (else it is max_message_bytes): a
        #: worker warns of one over the server's limit, and caps the default quietly.
        self.max_result_bytes_chosen = "max_result_bytes" in options
        self.prefetch = prefetch
        #: Outcomes each queue's record of recent outcomes keeps (0: none kept).
        self.recent_outcomes = recent_length(options, where)
        self.dead_bounds = dead_letter_bounds(options, where)  # what dead letters are kept
        self.clock = check_clock(options.get("clock"), where) or SystemClock()
        self.tasks: Dict[str, Task[Any, Any]] = {}
        #: Where tasks go by their names (``routes=``), checked here.
        self.routes = Routes(options.get("routes"), where)
        #: Schedules made with ``@app.periodic``, written by each worker as it starts.
        self.periodic_schedules: Dict[str, Schedule] = {}
        #: Functions ``on()`` added, called by the workers of this app.
        self.hooks = Hooks()
        self._broker_setting = broker
        # redis.asyncio clients belong to the loop they first ran on: one per loop.
        self._async_setting = check_async_client(options.get("async_broker"), where)
        self._async_brokers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncBroker]"
        self._async_brokers = weakref.WeakKeyDictionary()
        self._sender = Sender(lambda: self.broker, self.clock, max_message_bytes,
                              self.async_broker)
        self._sender.broadcast_limits = broadcast_limits(options, where)
        #: The argument types registered with ``register_type``.
        self.types = self._sender.types
        #: How replicas confirm enqueues and outcomes (durability.py).
        self.durability = self._sender.durability = Durability.build(
            options.get("durability"), options.get("min_replicas", 1),
            options.get("durability_timeout"), where)
        self._by_name = ByName(name, self._sender, self.tasks, self.routes, default_queue,
                               self.result_ttl)

    def __repr__(self) -> str:
        return f"<Minitask {self.name} tasks={len(self.tasks)}>"

    @staticmethod
    def check_queue_name(queue: str) -> None:
        check_queue_name(queue)

    # -- broker --------------------------------------------------------------

    #: The app's broker, connected on first use (then read with no call: ``Connected``).
    broker = Connected()
    _broker = property(made_broker, keep_broker)  # (None: the next use connects again)

    def _make_broker(self) -> Broker:
        connection = connect(self._broker_setting)
        check_socket_timeout(self.durability, connection.client, f"app {self.name!r}")
        broker = Broker(connection.client, self.name, connection.description,
                        self.types, (self.max_message_bytes, self.max_result_bytes))
        broker.transport.durability = self.durability
        broker.results.recent_length = self.recent_outcomes
        broker.results.dead_bounds = self.dead_bounds
        broker.queues.declared = self.worker_queues  # asked first by id
        return broker

    def close(self) -> None:
        """Close the app's connections to Redis; the next use connects again.

        Raises:
            BrokerError: Redis failed while closing.
        """
        broker, self._broker = self._broker, None
        if broker is not None:
            broker.close()

    def async_broker(self) -> AsyncBroker:
        """The app's broker for the running event loop (``redis.asyncio``).

        Made on first use in each loop, from ``async_broker=`` if the app was
        given one, else mirroring the blocking client's server and credentials.

        Raises:
            ConfigurationError: no loop is running, or the broker cannot be mirrored.
        """
        loop = running_loop("an async producer or handle call")
        found = self._async_brokers.get(loop)
        if found is None:
            client = self._async_setting
            if client is None:
                client = async_client_for(self.broker.client, self.broker.description)
            found = self._async_brokers[loop] = AsyncBroker(self.broker, client)
        return found

    async def aclose(self) -> None:
        """Close the async connections the running loop's ``a*`` calls opened.

        Raises:
            BrokerError: Redis failed while closing.
        """
        broker = self._async_brokers.pop(running_loop("aclose()"), None)
        if broker is not None:
            await broker.close()

    # -- tasks ---------------------------------------------------------------

    @overload
    def task(self, func: Callable[P, Coroutine[Any, Any, R]], /) -> AsyncTask[P, R]: ...

    @overload
    def task(self, func: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(self, /, **options: Any) -> TaskDecorator: ...

    def task(self, func: Optional[Callable[..., Any]] = None, /,
             **options: Any) -> Union[Task[Any, Any], TaskDecorator]:
        """Register a function as a task: ``@app.task`` or ``@app.task(...)``.

        Args:
            func: the function, when used bare.
            **options: ``name``, ``queue``, ``priority`` (0..9, 9 first),
                ``retries``, ``retry_backoff``, ``retry_backoff_max``,
                ``retry_on``, ``timeout`` and ``soft_timeout`` (seconds),
                ``ignore_result``, ``result_ttl`` (seconds), ``broadcast``,
                ``rate_limit``, ``max_running``, ``hide_args`` (its arguments
                hold secrets: ``minitask inspect``, ``dead show`` and the
                dashboard never show them).

        Returns:
            The ``Task`` (an ``AsyncTask`` for an ``async def``), or, with
            options, a decorator that returns it.

        Raises:
            ConfigurationError: a bad option, or ``func`` is a ``Task`` (a ValueError).
            DuplicateTaskError: another function already has this name.
        """
        def register(function: Callable[P, R]) -> Task[P, R]:
            resolved = TaskOptions.build(_a_function(function, "@app.task"), self.default_queue,
                                         self.result_ttl, options, self.routes.match)
            check_name_size(resolved.name)
            check_queue_name(resolved.queue, f"task {resolved.name!r}")
            existing = self.tasks.get(resolved.name)
            if existing is not None and _code_of(existing.func) != _code_of(function):
                raise DuplicateTaskError(f"task name {resolved.name!r} is already registered "
                                         f"to {existing.func!r}; pass name=... to one of them")
            registered: Task[P, R]
            if inspect.iscoroutinefunction(function):
                registered = AsyncTask(self._sender, function, resolved)
            else:
                registered = Task(self._sender, function, resolved)
            self.tasks[resolved.name] = registered
            return registered

        if func is not None:
            return register(func)
        return register  # type: ignore[return-value]

    # -- periodic tasks ------------------------------------------------------

    def periodic(self, *, cron: Optional[str] = None, every: Optional[float] = None,
                 tz: str = "UTC", args: Sequence[Any] = (),
                 kwargs: Optional[Dict[str, Any]] = None, catch_up: str = "latest",
                 overlap: bool = True, name: Optional[str] = None,
                 **task_options: Any) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Register a task that also runs on a schedule named after it.

        The workers that serve the task's queue fire its ticks: no beat process,
        and each tick runs once however many workers there are. The schedule is
        (re)written in Redis when a worker of this app starts.

        Args:
            cron: a 5-field cron expression (or ``@daily``...), read in ``tz``;
                needs ``minitask[cron]``.
            every: seconds between ticks (ticks fall on whole multiples of it
                since the Unix epoch, to the millisecond).
            tz: IANA time zone of ``cron`` (``every`` ignores it).
            args: positional arguments of each run.
            kwargs: keyword arguments of each run.
            catch_up: after a time with no worker up, ``"latest"`` runs the most
                recent missed tick once, ``"skip"`` runs none.
            overlap: False skips a tick while the last run is queued or running.
            name: the task's name, and the schedule's (default: the task's default).
            **task_options: the options of ``@app.task`` (``queue``, ``priority``...).

        Returns:
            A decorator that registers the function and returns its ``Task``.

        Raises:
            ConfigurationError: both or neither of ``cron`` and ``every``, a bad
                cron, ``every <= 0``, an unknown ``tz`` or ``catch_up``, a bad
                task option, a group option (``group_by``...: a tick is sent without
                a group) or a ``Task`` given (a ValueError naming the schedule).
            ArgumentError: ``args``/``kwargs`` do not fit the function (a TypeError).
            EncodeError: an argument msgpack cannot carry (a TypeError).
        """
        if name is not None:
            task_options["name"] = name

        def register(function: Callable[P, R]) -> Task[P, R]:
            probe = TaskOptions.build(_a_function(function, "@app.periodic"), self.default_queue,
                                      self.result_ttl, task_options, self.routes.match)
            schedule = build_schedule(probe.name, probe.name, function, cron=cron, every=every,
                                      tz=tz, args=args, kwargs=kwargs, catch_up=catch_up,
                                      overlap=overlap, queue=probe.queue,
                                      priority=probe.priority,
                                      max_message_bytes=self.max_message_bytes,
                                      types=self.types, group_options=probe.grouping.given())
            registered = self.task(**task_options)(function)
            self.periodic_schedules[schedule.name] = schedule
            return registered

        return register

    def on(self, event: str, fn: Hook) -> Hook:
        """Call ``fn`` in the worker at each ``event`` of a task or worker.

        ``fn(context)`` for ``task_start`` and ``task_prerun``; ``fn(context,
        value)`` for ``task_success``; ``fn(context, exception)`` for
        ``task_retry``, ``task_failure`` (every attempt that raised) and
        ``task_dead``; ``fn(context, status, value_or_exception)`` for
        ``task_postrun``. A task hook runs in the process or thread that runs
        the attempt (the supervisor's, for one the process pool killed), once
        the outcome is decided (before it, for ``task_start`` and
        ``task_prerun``; :doc:`/guide/observability` says when each runs); what
        it raises is logged and never changes the outcome.
        ``fn(worker)`` for ``worker_process_init`` (in each pool child or
        thread before its first task: if it raises, that one takes no work),
        ``worker_ready`` and ``worker_shutdown``.

        Args:
            event: ``task_start``, ``task_prerun``, ``task_success``,
                ``task_retry``, ``task_failure``, ``task_dead``,
                ``task_postrun``, ``worker_process_init``, ``worker_ready`` or
                ``worker_shutdown``.
            fn: the function to call; an ``async def`` one only for
                ``worker_process_init``, ``task_prerun`` and ``task_postrun``,
                on the asyncio pool, which awaits it on its loop.

        Returns:
            ``fn``, so that it also works as a decorator, with
            ``functools.partial(app.on, "task_success")``.

        Raises:
            ConfigurationError: an unknown event, ``fn`` is not callable, or it
                is an ``async def`` function for another event.
        """
        self.hooks.add(event, fn)
        return fn

    def register_type(self, cls: type, code: int, encode: Callable[[Any], bytes],
                      decode: Callable[[bytes], Any]) -> None:
        """Let task arguments and results be instances of ``cls``.

        They travel as msgpack extension ``code`` holding ``encode(value)``, read
        back with ``decode(data)``; register the same in every app that sends or
        reads them (:ref:`argument-types`).

        Args:
            cls: the class (its instances, subclasses' too, match).
            code: its extension code, from 32 to 127 (0 to 31 are minitask's).
            encode: value -> bytes.
            decode: bytes -> value.

        Raises:
            ConfigurationError: ``code`` is outside 32..127 or taken, or ``cls``
                is registered already or carried by minitask itself.
        """
        self.types.register(cls, code, encode, decode)

    def worker_queues(self) -> List[str]:
        """Queues a worker serves by default, the default queue first.

        Returns:
            The app's ``default_queue``, then, by name, the queues of its tasks
            and those its routes send to.
        """
        others = sorted(({t.queue for t in self.tasks.values()} | self.routes.queues())
                        - {self.default_queue})
        return [self.default_queue] + others

    # -- enqueueing ----------------------------------------------------------

    def batch(self) -> ContextManager[Batch]:
        """Send every call made inside a ``with`` block together, at its end.

        The calls are checked as they are made, and sent in one write when the
        block ends (one script call per queue, each all or nothing); an exception
        in the block sends none of them. A batch belongs to the thread (or asyncio
        task) that opened it; blocks nest, and the outermost one sends.

        Returns:
            A context manager; its ``Batch`` says how many calls it holds (``len``).

        Raises:
            BrokerError: (when the block ends) Redis failed; each queue's calls
                were enqueued whole or not at all. Not all or nothing across
                queues (Redis Cluster keeps each queue in a slot of its own): a
                refusal says how many calls were enqueued and how many not, names
                the queue refused and those enqueued all the same (with task names
                and ids), which must not be sent again.
        """
        return self._sender.batch()

    # -- workers -------------------------------------------------------------

    def worker(self, queues: Optional[Sequence[str]] = None, concurrency: int = 1,
               pool: str = "thread", burst: bool = False, grace: float = 30.0,
               prefetch: Optional[int] = None, subscriber: Optional[str] = None,
               max_tasks_per_child: Optional[int] = None,
               max_memory_per_child: Optional[int] = None, name: Optional[str] = None) -> Worker:
        """A worker for this app; call ``.run()`` on it.

        Args:
            queues: a list of the queues served, in order; default: ``worker_queues()``.
            concurrency: tasks run at once.
            pool: ``"thread"``, ``"process"`` or ``"asyncio"`` (one event loop,
                ``concurrency`` coroutines at once).
            burst: return once nothing is ready instead of waiting for more.
            grace: seconds running tasks get to finish after a stop request.
            prefetch: tasks leased per round trip; default: the app's ``prefetch``.
            subscriber: the name it runs broadcast calls as; default: the host name.
            max_tasks_per_child: (process pool) replace a child once it has handled
                this many tasks, between two of them.
            max_memory_per_child: (process pool) replace a child whose resident
                memory exceeds this many MB after a task.
            name: what status, the dashboard, ``shutdown`` and the record of
                recent outcomes call it; default: its id (host, pid and a random
                part).

        Returns:
            A ``Worker``: ``run()`` serves, ``run_once()`` handles one task.

        Raises:
            ConfigurationError: an option is invalid (``queues`` a str, not a list; a
                recycling limit on another pool than ``"process"``), or an ``async def``
                hook on such a pool.
        """
        return Worker(self, served_queues(self, queues), concurrency=concurrency,
                      pool=pool, burst=burst, grace=grace, prefetch=prefetch,
                      schedules=list(self.periodic_schedules.values()), subscriber=subscriber,
                      max_tasks_per_child=max_tasks_per_child,
                      max_memory_per_child=max_memory_per_child, name=name)


def recent_length(options: Dict[str, Any], where: str) -> int:
    """``recent_outcomes``, checked: a whole number from 0 (no record) to MAX_LENGTH."""
    value = options.get("recent_outcomes", DEFAULT_LENGTH)
    if type(value) is not int or not 0 <= value <= MAX_LENGTH:
        raise ConfigurationError(f"{where}: recent_outcomes must be an int from 0 (keep "
                                 f"none) to {MAX_LENGTH}, got {value!r}")
    return value


def _check_known(name: str, options: Dict[str, Any]) -> None:
    unknown = sorted(set(options) - APP_OPTIONS)
    if unknown:
        raise ConfigurationError(f"app {name!r}: unknown option(s) {', '.join(unknown)}; "
                                 f"valid extra options are {', '.join(sorted(APP_OPTIONS))}")


def _check_count(value: Any, what: str, where: str, most: int) -> None:
    if type(value) is not int or not 1 <= value <= most:
        raise ConfigurationError(f"{where}: {what} must be an int from 1 to {most}, "
                                 f"got {value!r}")


def _code_of(func: Callable[..., Any]) -> Any:
    """Re-importing a module re-registers the same code: that is not a duplicate."""
    return getattr(func, "__code__", func)


def _a_function(function: Callable[P, R], decorator: str) -> Callable[P, R]:
    """``function``, or for a Task (a decorator stacked on another) an error saying how
    to write it."""
    if isinstance(function, Task):
        raise ConfigurationError(
            f"{decorator} was applied to the task {function.name!r}, not to a function: "
            f"use one decorator on the function, @app.task(...) or @app.periodic(every=..., "
            f"<task options>) (which registers the task itself), or schedule a registered "
            f"task with app.add_schedule(name, task, every=...)")
    return function
