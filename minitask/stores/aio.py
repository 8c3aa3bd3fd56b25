"""The async producer and handle side, on ``redis.asyncio``: nothing blocks the loop.

``await task.adelay(...)``, ``await handle.aget()`` and the other ``a*`` twins
send the same Lua script calls, with the same keys, as their blocking
originals: the stores build each call (``enqueue_call``, ``state_call``...),
and this module only carries it over an asyncio connection. Messages are
built and checked by the same code as the blocking path (``Task``,
``Sender.prepare``), before anything is sent.

A ``redis.asyncio`` client belongs to the event loop it first ran on, so the
app keeps one ``AsyncBroker`` per running loop (``Minitask.async_broker()``).
"""
from __future__ import annotations

import asyncio
import hashlib
from contextlib import asynccontextmanager, contextmanager, suppress
from time import monotonic
from typing import Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import redis
import redis.asyncio
from redis.exceptions import MaxConnectionsError

from ..broker.durability import (WAITAOF_PROBE, Durability, check_socket_timeout,
                                 cut_short, fsync_refused, has_waitaof,
                                 takes_command_name, waitaof_in)
from ..broker.acl_check import (SENDING_SCRIPTS, SenderChecks, acheck_sender, check_again,
                                watch_layout)
from ..broker.cluster_sends import aslots_read, asend_once, confirm
from ..broker.packing import ScriptCall
from ..broker.refusals import broker_error
from ..broker.replies import require_readable_replies
from ..broker.transport import text
from ..broker.waits import block_cap
from ..errors import BrokerError, ConfigurationError, DecodeError
from .aio_clients import AsyncClient, AsyncResultWaits, cancels_asked, keep_cancel
from .aio_clients import async_client_for as async_client_for, twin_of as twin_of  # noqa: F401
from .aio_clients import check_async_client as check_async_client  # noqa: F401
from .aio_clients import Unmirrored as Unmirrored, in_resp2 as in_resp2  # noqa: F401
from .bounds import fields_call, fields_of, message_from
from .broker import Broker
from .aio_registry import list_queue
from .foreign import ignored, removed_members
from .names import MEMBER_BYTES, PAGE, REGISTRY_READ
from .queue import REGISTER_AGAIN
from .results import unwaitable
from .scripts import source


class AsyncBroker:
    """One app's Redis seen from one event loop: the stores' calls, awaited."""

    def __init__(self, broker: Broker, client: AsyncClient) -> None:
        require_readable_replies(client, "the async_broker")
        # a client of its own (async_broker=) has a socket timeout of its own
        check_socket_timeout(broker.transport.durability, client, f"app {broker.app_name!r}")
        self.broker = broker
        self.client = client
        self.description = broker.description
        self._shas: Dict[str, str] = {}
        #: When (``monotonic``) each queue was last registered (``QueueStore``'s rule)
        self._known_queues: Dict[str, float] = {}
        # A plain client's pool: script calls go out packed by the transport, as the
        # blocking ones do (redis-py would encode each of a call's 20 keys and arguments
        # again, and wrap the call in its retry and timeout machinery).
        plain = type(client) is redis.asyncio.Redis and getattr(client, "connection", None) is None
        self._pool: Any = client.connection_pool if plain else None
        self._cluster = isinstance(client, redis.asyncio.RedisCluster)
        # Any other client's pool too for the calls that send tasks, so that redis-py's
        # retry never sends one again after its reply was lost (a cluster's: cluster_sends)
        self._sends: Any = None if self._cluster else client.connection_pool
        self._named = self._sends is not None and takes_command_name(self._sends)
        self._waitaof = False  # the server has WAITAOF (asked at the first fsync write)
        self.acl_unchecked = True  # until a send's check of the ACL user passed (every primary)
        self.acl_checks = SenderChecks(isinstance(client, redis.asyncio.RedisCluster))
        if self.acl_checks.cluster:
            watch_layout(self)  # a node made primary later is asked before a send to it
        self._waits = AsyncResultWaits(client)
        most = getattr(getattr(client, "connection_pool", None), "max_connections", None)
        #: State reads in flight: a thousand aget() starting together queue here, where
        #: one that runs out of time leaves at once, not in the pool's queue
        self._state_reads = asyncio.Semaphore(max(1, most // 2) if isinstance(
            most, int) and not isinstance(most, bool) else 8)

    @contextmanager
    def errors(self, what: str, script: Optional[str] = None) -> Iterator[None]:
        """Turn redis-py's errors into BrokerError saying what failed, worded as the
        blocking path's (``Transport.failure``: a refusal named, not an outage)."""
        try:
            yield
        except MaxConnectionsError as exc:
            # a pool given as async_broker= that refuses when full: not a server problem
            raise BrokerError(f"Redis failed to {what} on {self.description}: all the "
                              f"connections its async client may open are in use ({exc}); "
                              f"give async_broker= a redis.asyncio.BlockingConnectionPool, "
                              f"which waits for one, or a larger max_connections",
                              reason="pool exhausted") from exc
        except (redis.RedisError, OSError) as exc:
            error = self.broker.transport.failure(exc, what, script)
            check_again(self, error)  # refused part way: the ACL changed, checked again
            raise error from exc

    async def run(self, call: ScriptCall, what: str) -> Any:
        """Run one script call as the stores built it (EVALSHA; loaded on NOSCRIPT)."""
        name, _, static_keys, tail, dynamic = call
        keys = list(static_keys) + list(tail[:dynamic])
        args = list(tail[dynamic:])
        sha = self._shas.get(name)
        if sha is None:
            sha = self._shas[name] = hashlib.sha1(source(name).encode()).hexdigest()
        pool = self._pool or (self._sends if name in SENDING_SCRIPTS else None)
        with self.errors(what, name):
            if self._cluster:  # (its slots read first: cluster_sends.aslots_read)
                await aslots_read(self.client)
            if self._cluster and name in SENDING_SCRIPTS:  # never by redis-py's retry
                reply = (await asend_once(self.client, sha, source(name), keys, args))[0]
                if isinstance(reply, Exception):
                    raise reply
                return reply
            for attempt in range(2):  # NOSCRIPT: loaded, then sent again the same way
                try:
                    if pool is not None:
                        return await self._send_packed(self.broker.transport.pack_call(call),
                                                       what, pool)
                    return await self.client.evalsha(sha, len(keys), *keys, *args)
                except redis.exceptions.NoScriptError:
                    if attempt:
                        raise
                    await self.client.script_load(source(name))

    async def run_confirmed(self, call: ScriptCall, what: str, durability: Durability) -> Any:
        """``run``, then a touch and WAIT (or WAITAOF) on the same connection, in one
        pipeline: the async twin of the transport's confirmed writes."""
        name, _, static_keys, tail, dynamic = call
        keys = list(static_keys) + list(tail[:dynamic])
        if durability.mode == "fsync" and not self._waitaof:
            await self._ask_waitaof()
        sha = hashlib.sha1(source(name).encode()).hexdigest()
        commands = [("EVALSHA", sha, len(keys), *keys, *tail[dynamic:]),
                    *durability.commands(keys[0])]
        with self.errors(what, name):
            if self._cluster:  # written once, to the slot's primary (NOSCRIPT: loaded)
                replies = await asend_once(self.client, sha, source(name), keys,
                                           tail[dynamic:], durability.commands(keys[0]))
                if isinstance(replies[0], Exception):
                    raise replies[0]
                confirm(replies, durability, what, self.description)
                return replies[0]
            for _ in range(2):
                replies = await self._send_confirmed(commands, durability, what)
                if not isinstance(replies[0], redis.exceptions.NoScriptError):
                    break
                await self.client.script_load(source(name))
            if isinstance(replies[0], Exception):  # the script's refusal: as it says
                raise replies[0]
            durability.check(replies[1] if isinstance(replies[1], Exception) else replies[-1],
                             what, self.description)  # (a refused touch: after the write)
        return replies[0]

    async def _send_confirmed(self, commands: Sequence[Sequence[Any]], durability: Durability,
                              what: str) -> List[Any]:
        """A script call, its touch and WAIT in one write on a connection of the pool,
        every reply read in turn (a refusal as an exception): a socket timeout on
        WAIT's reply alone means the call ran: its DurabilityError in WAIT's place
        (``run_confirmed`` raises the call's own refusal, or sends it again after
        NOSCRIPT, before it says the write was made)."""
        pool = self._sends
        connection = await pool.get_connection(*("EVALSHA",) * self._named)  # (redis-py < 5.1)
        replies: List[Any] = []
        written = False
        try:
            if not getattr(connection, "is_connected", False):
                await connection.connect()  # (its failure: nothing written)
            written = True  # a cut from here may follow the script call: it may have run
            await connection.send_packed_command(connection.pack_commands(commands))
            for index in range(len(commands)):
                try:
                    replies.append(await connection.read_response())
                except redis.ResponseError as exc:
                    replies.append(exc)
                except redis.TimeoutError as exc:
                    if index < len(commands) - 1:
                        raise
                    await connection.disconnect()  # WAIT's reply may still come
                    cut = cut_short(durability, what, self.description, exc)
                    cut.__cause__ = exc  # in WAIT's place: the script's refusal goes first
                    replies.append(cut)
        except BaseException as exc:
            await connection.disconnect()  # a reply left unread must not reach the next caller
            if written and isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)):
                raise broker_error(exc, what, self.description, sent=True) from exc
            raise
        finally:
            await pool.release(connection)
        return replies

    async def _ask_waitaof(self) -> None:
        """Refuse "fsync" before writing when the server has no WAITAOF (asked once:
        a server does not lose the command)."""
        with self.errors("ask Redis whether it has WAITAOF"):
            if isinstance(self.client, redis.asyncio.RedisCluster):
                loop = asyncio.get_running_loop()  # the blocking client's nodes: same servers
                found = await loop.run_in_executor(None, has_waitaof,
                                                   self.broker.transport.client)
            else:
                pool = self.client.connection_pool
                connection = await (pool.get_connection("COMMAND")
                                    if takes_command_name(pool) else pool.get_connection())
                try:  # raw: redis-py's parser breaks on an unknown command's nil
                    await connection.send_command(*WAITAOF_PROBE)
                    found = waitaof_in(await connection.read_response())
                finally:
                    await pool.release(connection)
        if not found:
            raise fsync_refused("no such command", self.description)
        self._waitaof = True

    async def _send_packed(self, command: bytes, what: str, pool: Any) -> Any:
        """Send one packed command on a connection of the pool and read its reply.

        A connection that failed part way is closed before it goes back to the pool:
        a reply left unread would answer the next caller's command. Failed once the
        command was written whole: a BrokerError saying Redis may have run it (``sent``)."""
        connection = await pool.get_connection(*("EVALSHA",) * self._named)  # (redis-py < 5.1)
        written = False
        try:
            await connection.send_packed_command(command)
            written = True
            return await connection.read_response()
        except redis.ResponseError:
            raise  # a whole reply was read: the connection stays usable
        except BaseException as exc:
            await connection.disconnect()
            if written and isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)):
                raise broker_error(exc, what, self.description, sent=True) from exc
            raise
        finally:
            await pool.release(connection)

    # -- producing -------------------------------------------------------------------

    async def enqueue(self, queue: str, entries: Sequence[Tuple[str, bytes, int, int]],
                      now_ms: int, durability: Optional[Durability] = None) -> int:
        queues = self.broker.queues
        what = f"enqueue into queue {queue!r}"
        async with self._listing(queue):
            call = queues.enqueue_now_call(queue, entries, now_ms)
            added = -1 if call is None else await self._run_as(call, what, durability)
            if added == -1:  # enqueue_now wrote nothing: the full enqueue will
                added = await self._run_as(queues.enqueue_call(queue, entries, now_ms), what,
                                           durability)
        return int(added)

    async def _run_as(self, call: ScriptCall, what: str,
                      durability: Optional[Durability]) -> Any:
        """``run`` the call, confirmed by replicas when ``durability`` asks it; the
        first one checked against the ACL user's commands first (acl_check.py)."""
        if self.acl_unchecked:
            await acheck_sender(self, [call], what)
        if durability is None or durability.mode is None:
            return await self.run(call, what)
        return await self.run_confirmed(call, what, durability)

    async def _register(self, queue: str) -> None:
        """List ``queue`` in the app's registry, again ``REGISTER_AGAIN`` s after the last
        time (``QueueStore.enqueue``'s rule)."""
        now = monotonic()
        if now - self._known_queues.get(queue, -REGISTER_AGAIN) >= REGISTER_AGAIN:
            await list_queue(self.client, self.broker.queues.app_keys.queues, queue,
                             self.errors)  # (another type: said once, as the sync path)
            self._known_queues[queue] = now

    async def enqueue_flow(self, queue: str, part: Sequence[Tuple[str, bytes, int, int]],
                           specs: Mapping[str, str], now_ms: int,
                           durability: Optional[Durability] = None) -> int:
        """``FlowStore.enqueue``, awaited: one chunk of flow-controlled calls (limits.py),
        its queue listed once it is written (or may be: a lost reply)."""
        call = self.broker.flow.enqueue_call(queue, part, specs, now_ms)
        async with self._listing(queue):
            added = await self._run_as(call, f"enqueue into queue {queue!r}", durability)
        return int(added)

    @asynccontextmanager
    async def _listing(self, queue: str) -> AsyncIterator[None]:
        """An enqueue's queue listed once it is written, or may be (unconfirmed, or its
        reply lost: a plain send's as a flow-controlled one's): findable by id."""
        try:
            yield
        except BrokerError as exc:
            if exc.sent:
                with suppress(BrokerError):  # (the connection that lost the reply: said)
                    await self._register(queue)
            raise
        await self._register(queue)

    # -- following -------------------------------------------------------------------

    async def queue_names(self) -> List[str]:
        """The queues a lookup by id asks, as ``QueueStore.lookup_names``: those the
        app declares, then at most ``REGISTRY_READ`` of its registries (SSCAN)."""
        store = self.broker.queues
        declared = store.declared()
        names: List[str] = list(declared)
        most = REGISTRY_READ + len(declared)
        self.broker.transport.register("names_page", source("names_page"))
        with self.errors("list queues"):
            for key in (store.app_keys.queues, store.app_keys.lanes):
                found: List[Any] = []
                cursor: Any = 0
                removed: List[Any] = []
                while len(found) < most - len(names):
                    try:  # names_page.lua: members longer than a name are removed, not sent
                        cursor, page, lengths = await self.run(
                            ("names_page", "", (), (key, cursor, PAGE, MEMBER_BYTES), 1),
                            "list queues")
                    except BrokerError as exc:
                        cause = exc.__cause__
                        if not (isinstance(cause, redis.ResponseError)
                                and str(cause).startswith("WRONGTYPE")):
                            raise
                        ignored(key, f"it holds another type than a set ({cause})")
                        break
                    found += page
                    removed += lengths
                    if int(cursor) == 0:
                        break
                removed_members(key, removed, "queue name")
                read = sorted({text(name) for name in found})[:max(0, most - len(names))]
                names += [name for name in read if name not in declared]
        return names

    async def state(self, queue: str, task_id: str) -> Tuple[str, Optional[bytes]]:
        results = self.broker.results
        async with self._state_reads:
            return results.state_of(await self.run(results.state_call(queue, task_id),
                                                   f"read the state of {task_id}"))

    async def ranges(self, keys: Sequence[str], most: int, what: str) -> List[Any]:
        """At most the first ``most`` + 1 bytes of each string key (b"" for no key), or
        the error of a key of another type, which no minitask wrote, for the caller
        to name (``workflow_reads.first_record``)."""
        found: List[Any] = []
        with self.errors(what):
            if self._cluster:
                await aslots_read(self.client)
            for key in keys:
                try:
                    found.append(await self.client.getrange(key, 0, most))
                except redis.ResponseError as exc:
                    if not str(exc).startswith("WRONGTYPE"):
                        raise
                    found.append(exc)
        return found

    async def get(self, key: str, what: str, most: Optional[int] = None) -> Optional[bytes]:
        """One string key's value (a task's progress), or None: also when the key holds
        another type, which no minitask wrote (said once); with ``most``, at most its
        first ``most`` + 1 bytes (b"" for no key)."""
        with self.errors(what):
            if self._cluster:
                await aslots_read(self.client)
            try:
                data: Optional[bytes] = await (self.client.get(key) if most is None else
                                               self.client.getrange(key, 0, most))
            except redis.ResponseError as exc:
                if not str(exc).startswith("WRONGTYPE"):
                    raise
                ignored(key, f"it holds another type than a string ({exc})")
                return None
        return data

    async def drop_handle_record(self, some_id: str) -> None:
        """``WorkflowStore.drop_handle_record`` under every queue, one command each."""
        keys = [self.broker.workflows.keys(queue).handle(some_id)
                for queue in await self.queue_names()]
        with self.errors(f"delete the handle record of {some_id}"):
            for key in keys:
                await self.client.delete(key)

    async def find_queue(self, task_id: str) -> Optional[str]:
        unread = None  # a queue whose keys cannot be read: only if no other knows it
        for queue in await self.queue_names():
            state = (await self.state(queue, task_id))[0]
            if state not in ("unknown", "unreadable"):
                return queue
            unread = unread or (queue if state == "unreadable" else None)
        return unread

    async def wait_result(self, queue: str, task_id: str, timeout: float) -> Optional[bytes]:
        """Wait until the task's outcome exists (at most ``timeout`` s, capped at 5);
        DecodeError, as the blocking twin's, when its result key holds another type."""
        key = self.broker.results.keys(queue).result(task_id)
        seconds, before = min(max(timeout, 0.002), block_cap(self.client)), cancels_asked()
        with self.errors(f"wait for the result of {task_id}"):
            if self._cluster:
                await aslots_read(self.client)
            try:
                found = await self._waits.read(key, seconds)
            except redis.ResponseError as exc:  # a key of another type: said as get() says it
                if not str(exc).startswith("WRONGTYPE"):
                    raise
                held = await self.client.type(key)
                ask = (self.broker.results.keys(queue).messages, task_id,
                       self.broker.results.bounds.message)
                try:
                    body = message_from(ask, fields_of([ask], await self.run(
                        fields_call([ask]), f"read message {task_id}"))[0])
                except DecodeError:
                    body = None
                raise unwaitable(key, task_id, body, held) from None
        keep_cancel(before)  # a cancel redis-py swallowed (Python 3.11) is not lost
        return found if isinstance(found, bytes) else None

    async def cancel(self, queue: str, task_id: str, result_ttl_ms: int) -> Optional[bytes]:
        results = self.broker.results
        ask = (results.keys(queue).messages, task_id, results.bounds.message)
        try:  # as the blocking twin reads it: a message too large is not read
            body = message_from(ask, fields_of([ask], await self.run(
                fields_call([ask]), f"read message {task_id}"))[0])
        except DecodeError:
            body = b""
        if body is None:
            return None
        done = await self.run(results.cancel_call(queue, task_id, body, result_ttl_ms),
                              f"cancel {task_id}")
        return body if done else None

    async def request_cancel(self, queue: str, task_id: str) -> bool:
        return self.broker.cancels.posted(queue, await self.run(
            self.broker.cancels.request_call(queue, task_id), f"ask to stop task {task_id}"))

    async def close(self) -> None:
        with self.errors("close the async connections"):
            for client in {id(c): c for c in (self.client, self._waits.stopped())}.values():
                await client.aclose()
                pool = getattr(client, "connection_pool", None)
                if pool is not None:  # a pool handed to the client is not closed with it
                    await pool.disconnect()


def running_loop(what: str) -> asyncio.AbstractEventLoop:
    """The running event loop; a clear error when called outside one."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise ConfigurationError(f"{what} must be awaited inside a running event loop "
                                 f"(asyncio.run(...)); use its blocking twin "
                                 f"outside one") from None


async def step_marked(broker: AsyncBroker, queue: str, task_id: str) -> bool:
    """``UnsentSteps.marked``, awaited: whether the step's marker says it was sent."""
    key = broker.broker.unsent.keys(queue).once(task_id)
    with broker.errors(f"read the marker of workflow step {task_id}"):
        if broker._cluster:
            await aslots_read(broker.client)
        try:
            state = await broker.client.hget(key, "state")
        except redis.ResponseError as exc:
            if not str(exc).startswith("WRONGTYPE"):
                raise
            return False  # no marker minitask wrote: it tells nothing
    return state in (b"sent", b"cancelled")
