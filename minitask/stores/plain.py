"""The plain ``delay()``'s write: a new id's message, ready at once, without a script.

``QueueStore.push`` is this class's ``push``: its message stored, its id pushed to
the tail of its ready list, a worker woken and the queue listed in the app's
registry, in one write of plain commands in MULTI/EXEC (a third of a script call's
Redis time).
"""
from __future__ import annotations

from time import monotonic
from typing import Any, Callable, Dict, Optional, Tuple

import redis

from ..broker.keys import QueueKeys
from ..broker.packing import bulk, command
from ..broker.transport import Transport
from ..errors import BrokerError
from ..printable import own_logger
from .foreign import ignored

logger = own_logger(__name__)

_MULTI = command("MULTI")
_EXEC = command("EXEC")
#: What the ACL needs for this write; without it a plain delay() runs enqueue_now.lua.
_NEEDS = "+multi +exec"


class PlainPush:
    """One queue store's plain writes: their packed commands, and whether MULTI/EXEC
    may be used at all (asked once, before the first: see ``usable``)."""

    def __init__(self, transport: Transport, keys: Callable[[str], QueueKeys], registry: str,
                 known: Dict[str, float], caps: Tuple[int, float]) -> None:
        self.transport = transport
        self.keys = keys
        self.registry = registry
        #: The queue store's registered queues, each with when it last registered it
        self.known = known
        #: The wake list's cap; the seconds after which a write registers its queue again
        self.wake_cap, self.again = caps
        #: push()'s packed commands by (queue, priority), less the id and message
        self._parts: Dict[Tuple[str, int], Tuple[bytes, bytes, bytes, bytes, bytes]] = {}
        #: push()es made into each queue so far (every ``wake_cap``-th trims its wake list)
        self._pushed: Dict[str, int] = {}
        #: When a write last found each queue's list empty and registered it (``monotonic``)
        self._emptied: Dict[str, float] = {}
        #: None: not asked yet; False: refused (said once), every call takes the script
        self._usable: Optional[bool] = None

    def push(self, queue: str, entry: Tuple[str, bytes, int, int]) -> bool:
        """Write a new id's message ready at once; False when it wrote nothing: a queue
        this store has not enqueued into yet (``enqueue`` registers it first), Redis
        Cluster, an ACL without MULTI/EXEC, or data minitask did not write (what was
        written is taken back; the caller's script then refuses the call, naming the key);
        True when only its wake list is of another type: the task is written, and stays.

        The write is one MULTI/EXEC: a connection cut part way leaves nothing (a
        write can reach Redis in parts, however short), and no fetch meets the id
        without its message. A write ``again`` seconds or more after this store last
        registered its queue adds it to the app's registry in the same MULTI/EXEC
        (SADD), so that a registry lost (a restart without persistence, a failover to
        an empty replica, a deleted key) lists the queue again at its next task:
        ``inspect``, ``cancel``, ``purge`` and ``status`` find what it holds. Not every
        write: a SADD costs a write a fifth more Redis time.
        Due delayed tasks are not promoted first: the next fetch does (the ordering
        rules, docs/explanations/guarantees.rst). The wake list gets a token (the
        scripts push none past ``wake_cap``: this write cannot read the length first).
        A fetch that finds the queue empty deletes them, but a queue whose workers are
        always behind is never found empty, and would gain a token per task for ever;
        so every ``wake_cap``-th push of this store into a queue (its first included)
        also trims the list to its last ``wake_cap``: a list holds at most
        ``wake_cap`` tokens more than that per process sending plain calls to it. An
        LTRIM with every push would cost Redis a quarter more per ``delay()``.
        """
        registered = self.known.get(queue)
        if registered is None or self._usable is False or not (self._usable or self._ask()):
            return False  # (refused once: never asked again)
        task_id, body, priority, _ = entry
        parts = self._parts.get((queue, priority))
        if parts is None:
            k = self.keys(queue)
            parts = self._parts[(queue, priority)] = (
                b"*4\r\n" + bulk("HSET") + bulk(k.messages),
                b"*3\r\n" + bulk("RPUSH") + bulk(k.ready[9 - priority]),
                command("RPUSH", k.wake, "1"), command("SADD", self.registry, queue),
                command("LTRIM", k.wake, -self.wake_cap, -1))
        store, ready, wake, register, trim = parts
        pushed_before = self._pushed.get(queue, 0)  # (threads may race: a trim more or less)
        self._pushed[queue] = pushed_before + 1
        if pushed_before % self.wake_cap:
            trim = b""
        now = monotonic()
        if now - registered < self.again:
            register = b""
        key = bulk(task_id)
        what = f"enqueue into queue {queue!r}"
        try:
            replies = self.transport.send_commands(
                b"".join((_MULTI, store, key, bulk(body), ready, key, wake, register, trim,
                          _EXEC)), 5 + bool(trim) + bool(register), what)
        except BrokerError as exc:
            if exc.sent and self._orphaned(queue, task_id, priority, what):
                return False  # taken back: the caller's script refuses, naming the key
            raise
        if replies is None:
            return False
        if isinstance(replies[0], Exception):  # MULTI refused: each command ran on its own
            self._refused(replies[0])
            replies = replies[1:5]
        elif isinstance(replies[-1], list):  # EXEC's replies
            replies = replies[-1]
        else:  # EXEC's refusal: nothing written
            # (redis-py drops the EXECABORT code from its text: told by its class)
            if not isinstance(replies[-1], redis.exceptions.ExecAbortError):
                # EXEC itself refused: still in MULTI
                self._refused(replies[-1])
            replies = [replies[-1]] * 4
        stored = not isinstance(replies[0], Exception)
        pushed = not isinstance(replies[1], Exception)
        if pushed and stored and isinstance(replies[2], Exception):
            # only the wake push refused (a wake list of another type): the task stands,
            # and may be running (a polling worker), so nothing is taken back; the next
            # write goes by enqueue.lua (the queue unknown), which moves the list aside
            self.known.pop(queue, None)
            return True
        if pushed and stored:
            if register:  # (of another type: the queue runs, unlisted, said once)
                self.known[queue] = now
                self._registered(replies[3])
            elif replies[1] == 1 and now - self._emptied.get(queue, -self.again) >= self.again:
                self._register_emptied(queue, now)
            return True
        # (no worker can hold what is taken back: an id without its message, a message
        # no ready list names; the caller's script then refuses, naming the key)
        self._take_back(queue, task_id, priority, stored, pushed,
                        not isinstance(replies[2], Exception), what)
        return False

    def _register_emptied(self, queue: str, now: float) -> None:
        """The write found the queue's list empty, as the first after a restart without
        persistence or a flush (every key lost, the registry too): the queue registered
        again at once, in a round trip of its own (at most one a second per queue: a
        queue that workers keep empty finds it so at every write)."""
        self._emptied[queue] = now
        try:
            replies = self.transport.send_commands(
                command("SADD", self.registry, queue), 1, f"register queue {queue!r}")
        except BrokerError:
            return  # (the task is written; the next write a second on registers it)
        self.known[queue] = now
        self._registered(None if replies is None else replies[0])

    def _registered(self, reply: Any) -> None:
        if isinstance(reply, Exception):
            ignored(self.registry, f"it holds another type than a set ({reply})")

    def _orphaned(self, queue: str, task_id: str, priority: int, what: str) -> bool:
        """Whether a write whose reply was lost stored the message while its ready list
        (of another type) refused the push: then, its EXEC having run, the message is
        taken back (no fetch could ever reach it, yet status() would say queued).
        Anything else (the list one of ours or none, no message yet, Redis unreachable):
        False, and the caller hears the write may have been made; so too when a fetch or
        a script moved the foreign list aside between the write and this look (a window
        docs/explanations/guarantees.rst names: the refused push cannot be told)."""
        k = self.keys(queue)
        try:
            with self.transport.errors(f"look at what the lost {what} wrote"):
                pipe = self.transport.client.pipeline(transaction=False)
                pipe.type(k.ready[9 - priority])
                pipe.hexists(k.messages, task_id)
                kind, stored = pipe.execute()
        except BrokerError:
            return False
        if kind in (b"list", b"none", "list", "none") or not stored:
            return False
        self._take_back(queue, task_id, priority, True, False, True, what)
        return True

    def _take_back(self, queue: str, task_id: str, priority: int, stored: bool, pushed: bool,
                   woke: bool, what: str) -> None:
        k = self.keys(queue)
        with self.transport.errors(what):
            pipe = self.transport.client.pipeline(transaction=False)
            if pushed:
                pipe.lrem(k.ready[9 - priority], -1, task_id)
            if stored:
                pipe.hdel(k.messages, task_id)
            if woke:
                pipe.lpop(k.wake)  # a token: any one will do
            pipe.execute(raise_on_error=False)

    def _ask(self) -> bool:
        """Whether MULTI/EXEC may be used, asked once (an empty MULTI/EXEC, one round
        trip) before the first plain write: an ACL without them would have the write's
        commands run one by one, outside any transaction. Refused: said once, and
        every plain call takes its script. An outage leaves it unasked (the script's
        call then says what failed)."""
        try:
            replies = self.transport.send_commands(_MULTI + _EXEC, 2, "check MULTI/EXEC")
        except BrokerError:
            return False
        if replies is None:
            return False
        refusal = next((reply for reply in replies if isinstance(reply, Exception)), None)
        if refusal is not None:
            self._refused(refusal)
            return False
        self._usable = True
        return True

    def _refused(self, refusal: Any) -> None:
        """MULTI or EXEC refused: off for good, said once; this connection dropped (an
        EXEC refused leaves it inside MULTI)."""
        try:
            self.transport.connections.own().disconnect()
        except (redis.RedisError, OSError):  # (it could not connect: none to drop)
            pass
        if self._usable is False:
            return
        self._usable = False
        logger.warning(
            "Redis at %s refused MULTI/EXEC (%s): a plain delay() now goes by the "
            "enqueue_now.lua script instead of its plain MULTI/EXEC write, about three "
            "times Redis's time per call; grant the ACL user %s (the ACL list of the "
            "docs' Scaling out page)", self.transport.description, refusal, _NEEDS)
