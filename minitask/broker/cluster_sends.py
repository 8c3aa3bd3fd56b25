"""Script calls that write tasks, on Redis Cluster: written once, never again by a retry.

redis-py's cluster client sends a command again when its connection fails or
times out (its ``retry``: ten times by default), also once the command was
written and ran: a script that sends tasks could run twice, the second time
after a worker took and finished the task the first one wrote. So minitask
writes such a call (and the touch and WAIT that confirm it) itself, on a
connection of the primary of its slot. It is sent again only where Redis said
it did not run it (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, NOSCRIPT) or it was
never written whole (a connection refused), for as long as the client may take
to connect (``budget_of``); a call still refused when that runs out fails as
``RanOut`` (``RanOutUnreachable`` where no node could be reached), which says so
plainly, the last refusal its cause. A connection that fails, or a reply that
cannot be read, once the call was written raises ``ReplyLost``: Redis may have run it.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, List, Optional, Sequence

import redis
from redis.exceptions import (AskError, BusyLoadingError, ClusterDownError, MaxConnectionsError,
                              MovedError, RedisClusterException, TryAgainError)

from .durability import Durability, cut_short, takes_command_name
from .writes import WriteFailed, write_counted

__all__ = ["RanOut", "RanOutUnreachable", "ReplyLost", "aslots_read", "asend_once",
           "budget_of", "confirm", "send_once"]

#: How long a call is sent again (seconds) where the client sets no
#: ``socket_connect_timeout``: minitask's own default for it.
DEFAULT_BUDGET = 5.0
#: The least time a call is sent again, however short the connect timeout (a
#: slot migration takes a moment whatever the client's settings).
MIN_BUDGET = 1.0
#: Redirects (ASK, MOVED) in a row followed at once; any more wait as a refusal does.
REDIRECTS = 5
#: The first pause before a call is sent again (a slot being migrated, a node
#: loading, a failover under way), doubled at each pause up to ``_MAX_PAUSE``.
_FIRST_PAUSE = 0.05
_MAX_PAUSE = 0.5
#: redis-py's major version.
_REDIS_PY = int(redis.__version__.split(".")[0])


class ReplyLost(redis.ConnectionError):
    """The connection failed after the script call was written whole: it may have run."""


class RanOut(redis.ResponseError):
    """Redis Cluster refused a script call each time it was sent (a slot moving, the
    cluster down) for the whole of its budget: it did not run. Its ``__cause__`` is
    the last refusal, whose words alone (TRYAGAIN's "Multiple keys request during
    rehashing of slot") did not say that a budget ran out."""


class RanOutUnreachable(redis.ConnectionError):
    """As ``RanOut``, where the last try found no node to take the call (a connection
    refused, a node loading its data): an outage to ride out, as its cause is."""


#: What each refusal (``_refusal``) says of the cluster, for ``RanOut``'s message.
_WHY = {"wait": "the slot's keys were split between two nodes by a migration under way "
                "(TRYAGAIN)",
        "moved": "the slot kept moving between nodes (MOVED, ASK)",
        "ask": "the slot kept moving between nodes (MOVED, ASK)",
        "down": "the cluster was down (CLUSTERDOWN: a failover under way, or slots "
                "served by no node)",
        "load": "Redis kept answering that it did not know the script (NOSCRIPT)",
        "loading": "the slot's node was loading its data (LOADING)",
        "lost": "no node of the slot could be reached"}


def budget_of(cluster: Any) -> float:
    """How long a call Redis refused (or never got) is sent again: the client's
    ``socket_connect_timeout``, the time the app already gives a node to answer
    (``DEFAULT_BUDGET`` where it sets none; ``MIN_BUDGET`` at least). A failover
    takes the cluster's ``cluster-node-timeout`` and a second or so: a connect
    timeout as long rides it out."""
    kwargs = getattr(getattr(cluster, "nodes_manager", None), "connection_kwargs", None) or {}
    setting = kwargs.get("socket_connect_timeout")
    return max(MIN_BUDGET, float(setting)) if setting else DEFAULT_BUDGET


class _Tries:
    """Where a call goes next and how long it waits first, until its budget is spent."""

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.deadline = time.monotonic() + budget
        self.sent = 0  # writes of the call made
        self.target: Optional[Any] = None  # a node an ASK or MOVED named: the next write's
        self.asking = False  # the target is importing the slot: ASKING before each command
        self.next_pause = _FIRST_PAUSE
        self.redirects = 0  # in a row
        self.loaded = False

    def send_to(self, node: Optional[Any], asking: bool = False) -> None:
        """Send the next write to ``node`` (None: the slot's primary as the client knows it)."""
        self.target, self.asking = node, asking and node is not None

    def pause(self, refusal: str) -> Optional[float]:
        """The pause before the next write; None once the budget is spent (the last
        refusal or failure stands). A redirect is followed at once (``REDIRECTS`` in a
        row), and so is the write after the first NOSCRIPT (the script just loaded)."""
        self.sent += 1
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        redirect = refusal in ("ask", "moved")
        self.redirects = self.redirects + 1 if redirect else 0
        if (redirect and self.redirects <= REDIRECTS) or (refusal == "load" and not self.loaded):
            self.loaded = self.loaded or refusal == "load"
            return 0.0
        pause = min(self.next_pause, left)
        self.next_pause = min(self.next_pause * 2, _MAX_PAUSE)
        return pause

    def ran_out(self, refusal: str, last: BaseException, key: str) -> BaseException:
        """The error of a call whose budget ran out, ``last`` the last refusal (or
        failure) of it, its cause: what happened, said plainly."""
        if isinstance(last, BusyLoadingError):
            refusal = "loading"
        kind = (RanOutUnreachable if isinstance(last, (redis.ConnectionError,
                                                       redis.TimeoutError, OSError))
                else RanOut)
        error = kind(f"Redis Cluster did not run the call (key {key!r}) within its budget of "
                     f"{self.budget:g} s (the client's socket_connect_timeout), sent "
                     f"{self.sent} time(s): {_WHY.get(refusal, 'it refused it')}; it did not "
                     f"run, so sending it again is safe (Redis's last refusal: {last})")
        error.__cause__ = last
        return error


def _refusal(reply: Any) -> str:
    """What a reply to the script call says: "ran" (its reply, or a refusal the caller
    raises), else why Redis did not run it: "load" (NOSCRIPT), "moved", "ask", "down"
    (CLUSTERDOWN), "wait" (TRYAGAIN: the slot's keys split by a migration; LOADING)."""
    if isinstance(reply, redis.exceptions.NoScriptError):
        return "load"
    if isinstance(reply, MovedError):  # (a subclass of AskError)
        return "moved"
    if isinstance(reply, AskError):
        return "ask"
    if isinstance(reply, ClusterDownError):
        return "down"
    if isinstance(reply, (TryAgainError, BusyLoadingError)):
        return "wait"
    return "ran"


def send_once(cluster: Any, sha: str, source: str, keys: Sequence[str],
              args: Sequence[Any], then: Sequence[Sequence[Any]] = ()) -> List[Any]:
    """EVALSHA of a script and the commands ``then`` (a touch and WAIT) in one write
    to the primary of the slot of ``keys``; every reply, a refusal as an exception.

    One connection carries them all, so WAIT asks the shard's own replicas about
    the connection that wrote. A refusal that says the script did not run sends the
    whole write again, within ``budget_of`` the client: at once to the node a
    redirect names (after an ASK, with ASKING, until that node runs it or says
    MOVED: a TRYAGAIN there means the migration is under way), after a growing
    pause where Redis said to try again; a moved slot or a lost node makes the
    client read the cluster's layout again.

    Raises:
        ReplyLost: the connection failed once the call was written (it may have run).
        redis.ConnectionError, redis.TimeoutError: before it was (it did not run).
    """
    call = ("EVALSHA", sha, len(keys), *keys, *args)
    tries = _Tries(budget_of(cluster))
    while True:
        node = tries.target or cluster.get_node_from_key(keys[0])
        client = cluster.get_redis_connection(node)
        try:
            replies = _exchange(client.connection_pool, [call, *then], asking=tries.asking)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            _relearn(cluster)  # after a failover: the next try goes to the new primary
            tries.send_to(None)
            if not _unwritten(exc):
                raise
            pause = tries.pause("lost")
            if pause is None:
                raise tries.ran_out("lost", exc, keys[0]) from exc
            time.sleep(pause)
            continue
        first = replies[0]
        refusal = _refusal(first)
        if refusal == "ran":
            return replies
        if refusal == "load":
            client.script_load(source)  # the script did not run: load it, send all again
        elif refusal in ("ask", "moved"):
            named = cluster.get_node(host=first.host, port=first.port)
            if named is None or refusal == "moved":
                _relearn(cluster)
                named = cluster.get_node(host=first.host, port=first.port)
            tries.send_to(named, asking=refusal == "ask")
        elif refusal == "down":
            _relearn(cluster)
            tries.send_to(None)
        pause = tries.pause(refusal)  # ("wait": to the same node, ASKING as before)
        if pause is None:  # the caller raises it (the call did not run)
            return [tries.ran_out(refusal, first, keys[0]), *replies[1:]]
        time.sleep(pause)


def _exchange(pool: Any, commands: Sequence[Sequence[Any]], asking: bool) -> List[Any]:
    """``commands`` in one write on a connection of ``pool`` (each behind an ASKING
    where ``asking``), their replies read in turn; the first is the script call's."""
    connection = pool.get_connection(*("EVALSHA",) * takes_command_name(pool))
    sent = [part for one in commands for part in ((("ASKING",), one) if asking else (one,))]
    step = 2 if asking else 1
    try:
        packed = [b"".join(connection.pack_command(*one)) for one in sent]
        ends, offset = [], 0
        for one in packed:
            offset += len(one)
            ends.append(offset)
        try:
            write_counted(connection, b"".join(packed), ends)
        except WriteFailed as exc:  # cut after the call: it may have run
            if exc.whole >= step:
                raise ReplyLost(f"{exc} (after the script call)") from exc
            raise
        replies = _read(connection, len(sent), step - 1)
    except BaseException:
        connection.disconnect()  # a reply left unread must not reach the next caller
        raise
    finally:
        pool.release(connection)
    return replies[step - 1::step]


def _read(connection: Any, count: int, call: int) -> List[Any]:
    """``count`` replies, a refusal as its ResponseError. The connection failing,
    or a reply that cannot be read, before the reply of the script call (at
    ``call``): ``ReplyLost``; at it or after it, the failure in place of each reply
    not read (LOADING in the call's place: refused, not run)."""
    replies: List[Any] = []
    for index in range(count):
        try:
            replies.append(connection.read_response())
        except redis.ResponseError as exc:
            replies.append(exc)
        except (redis.RedisError, OSError) as exc:  # (InvalidResponse: a garbled reply)
            _check_read(exc, index, call)
            connection.disconnect()  # (redis-py's read_response did it too)
            replies += [exc] * (count - index)
            break
    return replies


def _check_read(exc: BaseException, index: int, call: int) -> None:
    """Raise ``ReplyLost`` where a failed read at ``index`` leaves the script call's
    fate unknown: at or before the call, but for its own LOADING (refused: redis-py
    raises it as a ConnectionError and drops the connection)."""
    if index < call or (index == call and not isinstance(exc, BusyLoadingError)):
        if isinstance(exc, redis.exceptions.InvalidResponse):  # (its words: "Protocol
            # error", which would read as Redis's refusal of a command it could not read)
            raise ReplyLost("a reply Redis sent was unreadable (InvalidResponse); the "
                            "connection is closed") from exc
        raise ReplyLost(str(exc)) from exc


async def asend_once(cluster: Any, sha: str, source: str, keys: Sequence[str],
                     args: Sequence[Any], then: Sequence[Sequence[Any]] = ()) -> List[Any]:
    """``send_once`` on a ``redis.asyncio.RedisCluster``. A write it cannot count: a
    failure once connected (the write begun) may follow the call: ``ReplyLost``."""
    call = ("EVALSHA", sha, len(keys), *keys, *args)
    await cluster.initialize()  # a no-op once the slots are known (and not lost)
    tries = _Tries(budget_of(cluster))
    while True:
        node = tries.target or cluster.get_node_from_key(keys[0])
        try:
            replies = await _aexchange(node, [call, *then], asking=tries.asking)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            await _arelearn(cluster)
            tries.send_to(None)
            if not _unwritten(exc):
                raise
            pause = tries.pause("lost")
            if pause is None:
                raise tries.ran_out("lost", exc, keys[0]) from exc
            await asyncio.sleep(pause)
            continue
        first = replies[0]
        refusal = _refusal(first)
        if refusal == "ran":
            return replies
        if refusal == "load":
            await cluster.script_load(source)  # (on every primary)
        elif refusal in ("ask", "moved"):
            named = cluster.get_node(host=first.host, port=first.port)
            if named is None or refusal == "moved":
                await _arelearn(cluster)
                named = cluster.get_node(host=first.host, port=first.port)
            tries.send_to(named, asking=refusal == "ask")
        elif refusal == "down":
            await _arelearn(cluster)
            tries.send_to(None)
        pause = tries.pause(refusal)
        if pause is None:
            return [tries.ran_out(refusal, first, keys[0]), *replies[1:]]
        await asyncio.sleep(pause)


async def aslots_read(cluster: Any) -> None:
    """Before a command redis-py routes: have a ``redis.asyncio.RedisCluster`` read
    the cluster's slots if it has not (its first command; after a CLUSTERDOWN closed
    it). redis-py picks a command's node before it reads them, so a first keyed call
    went to a random primary, and the MOVED that answered it was kept under the
    address Redis gave, never passed through ``address_remap``: that slot's calls
    then went around the user's NAT or proxy. Once read: one attribute read."""
    if cluster.get_default_node() is None:
        await cluster.initialize()


async def _aexchange(node: Any, commands: Sequence[Sequence[Any]], asking: bool) -> List[Any]:
    """``_exchange`` on a node of an asyncio cluster client."""
    connection = node.acquire_connection()
    sent = [part for one in commands for part in ((("ASKING",), one) if asking else (one,))]
    step = 2 if asking else 1
    replies: List[Any] = []
    try:
        if getattr(connection, "is_connected", False) and await _stale(connection):
            await connection.disconnect()  # closed by Redis while idle (a restart): anew
        if not getattr(connection, "is_connected", False):
            await connection.connect()  # (its failure, or the health check's: nothing written)
        else:
            await connection.check_health()
        try:
            await connection.send_packed_command(connection.pack_commands(sent),
                                                 check_health=False)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise ReplyLost(f"{exc} (writing the script call)") from exc
        for index in range(len(sent)):
            try:
                replies.append(await connection.read_response())
            except redis.ResponseError as exc:
                replies.append(exc)
            except (redis.RedisError, OSError) as exc:  # (InvalidResponse: a garbled reply)
                _check_read(exc, index, step - 1)
                await connection.disconnect()
                replies += [exc] * (len(sent) - index)
                break
    except BaseException:
        await connection.disconnect()  # a reply left unread must not reach the next caller
        raise
    finally:
        node.release(connection)
    return replies[step - 1::step]


async def _stale(connection: Any) -> bool:
    """Whether an idle connection has something to read (Redis closed it: a node
    restarted), as redis-py's own pools ask before they hand one out."""
    # (redis-py 8 named it back ``can_read``; before, ``can_read`` read what it found)
    name = "can_read" if _REDIS_PY >= 8 else "can_read_destructive"
    try:
        return bool(await getattr(connection, name)())
    except (redis.RedisError, OSError):
        return True


async def _arelearn(cluster: Any) -> None:
    try:
        await cluster.nodes_manager.initialize()
    except (redis.RedisError, RedisClusterException, OSError):
        pass  # the caller's own error says what failed; the next call tries again


def _unwritten(exc: BaseException) -> bool:
    """Whether a failure left the script call unwritten (a connection refused, a write
    cut before the call went whole), so that sending it again is harmless (a full pool
    or refused credentials: unwritten, but no wait helps)."""
    return (isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError))
            and not isinstance(exc, (ReplyLost, MaxConnectionsError, redis.AuthenticationError)))


def _relearn(cluster: redis.RedisCluster) -> None:
    """Read the cluster's slots again (after a failover); quietly, if it is not back yet."""
    try:
        cluster.nodes_manager.initialize()
    except (redis.RedisError, OSError):
        pass  # the caller's own error says what failed; the next call tries again


def confirm(replies: List[Any], durability: Durability, what: str, where: str) -> None:
    """``Durability.check`` of ``send_once``'s replies: the touch's refusal, else WAIT's
    reply; a socket timeout that cut WAIT short, its DurabilityError (the script's
    reply came: the write was made)."""
    reply = replies[1] if isinstance(replies[1], redis.ResponseError) else replies[-1]
    if isinstance(reply, redis.TimeoutError):
        cut = cut_short(durability, what, where, reply)
        cut.__cause__ = reply
        reply = cut
    durability.check(reply, what, where)
