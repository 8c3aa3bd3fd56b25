"""Script calls that write tasks, on Redis Cluster: written once, never again by a retry.

redis-py's cluster client sends a command again when its connection fails or
times out (its ``retry``: ten times by default), also once the command was
written and ran: a script that sends tasks could run twice, the second time
after a worker took and finished the task the first one wrote. So minitask
writes such a call (and the touch and WAIT that confirm it) itself, on a
connection of the primary of its slot. It is sent again only where Redis said
it did not run it (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, NOSCRIPT) or it was never
written whole (a connection refused); a connection that fails once the call was
written raises ``ReplyLost``: Redis may have run it.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, List, Optional, Sequence

import redis
from redis.exceptions import (AskError, ClusterDownError, MovedError, RedisClusterException,
                              TryAgainError)

from .durability import Durability, cut_short, takes_command_name
from .writes import WriteFailed, write_counted

__all__ = ["ReplyLost", "aslots_read", "asend_once", "confirm", "send_once"]

#: Redirects (a slot moved or moving, a failover) followed before the last is raised.
REDIRECTS = 5
#: Pause before a call Redis asked to try again (a slot being migrated).
_TRY_AGAIN_PAUSE = 0.05
#: Pause before a call is sent again that a failed connection left unwritten (a
#: failover under way: the cluster's layout is read again first).
_DOWN_PAUSE = 0.25


class ReplyLost(redis.ConnectionError):
    """The connection failed after the script call was written whole: it may have run."""


def send_once(cluster: Any, sha: str, source: str, keys: Sequence[str],
              args: Sequence[Any], then: Sequence[Sequence[Any]] = ()) -> List[Any]:
    """EVALSHA of a script and the commands ``then`` (a touch and WAIT) in one write
    to the primary of the slot of ``keys``; every reply, a refusal as an exception.

    One connection carries them all, so WAIT asks the shard's own replicas about
    the connection that wrote. A redirect or NOSCRIPT (the script did not run)
    sends the whole write again, to the node named (at most ``REDIRECTS`` times);
    a moved slot or a lost node makes the client read the cluster's layout again.

    Raises:
        ReplyLost: the connection failed once the call was written (it may have run).
        redis.ConnectionError, redis.TimeoutError: before it was (it did not run).
    """
    call = ("EVALSHA", sha, len(keys), *keys, *args)
    asked: Optional[Any] = None  # the node an ASK named: the next write goes there
    replies: List[Any] = []
    for attempt in range(REDIRECTS):
        node = asked or cluster.get_node_from_key(keys[0])
        client = cluster.get_redis_connection(node)
        try:
            replies = _exchange(client.connection_pool, [call, *then], asking=asked is not None)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            _relearn(cluster)  # after a failover: the next try goes to the new primary
            if not _unwritten(exc) or attempt == REDIRECTS - 1:
                raise
            time.sleep(_DOWN_PAUSE)
            continue
        first, asked = replies[0], None
        if isinstance(first, redis.exceptions.NoScriptError):
            client.script_load(source)  # the script did not run: load it, send all again
        elif isinstance(first, AskError):
            asked = cluster.get_node(host=first.host, port=first.port)
            if asked is None:
                _relearn(cluster)
        elif isinstance(first, (MovedError, ClusterDownError)):
            _relearn(cluster)
        elif isinstance(first, TryAgainError):
            time.sleep(_TRY_AGAIN_PAUSE)
        else:
            return replies
    return replies  # the last refusal: the caller raises it (the call did not run)


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
    """``count`` replies, a refusal as its ResponseError. The connection failing
    before the reply of the script call (at ``call``) came: ``ReplyLost``; after it,
    the failure in place of each reply not read (the call ran: its reply stands)."""
    replies: List[Any] = []
    for index in range(count):
        try:
            replies.append(connection.read_response())
        except redis.ResponseError as exc:
            replies.append(exc)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            if index <= call:
                raise ReplyLost(str(exc)) from exc
            connection.disconnect()
            replies += [exc] * (count - index)
            break
    return replies


async def asend_once(cluster: Any, sha: str, source: str, keys: Sequence[str],
                     args: Sequence[Any], then: Sequence[Sequence[Any]] = ()) -> List[Any]:
    """``send_once`` on a ``redis.asyncio.RedisCluster``. A write it cannot count: a
    failure once connected (the write begun) may follow the call: ``ReplyLost``."""
    call = ("EVALSHA", sha, len(keys), *keys, *args)
    asked: Optional[Any] = None
    replies: List[Any] = []
    await cluster.initialize()  # a no-op once the slots are known (and not lost)
    for attempt in range(REDIRECTS):
        node = asked or cluster.get_node_from_key(keys[0])
        try:
            replies = await _aexchange(node, [call, *then], asking=asked is not None)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            await _arelearn(cluster)
            if not _unwritten(exc) or attempt == REDIRECTS - 1:
                raise
            await asyncio.sleep(_DOWN_PAUSE)
            continue
        first, asked = replies[0], None
        if isinstance(first, redis.exceptions.NoScriptError):
            await cluster.script_load(source)  # (on every primary)
        elif isinstance(first, AskError):
            asked = cluster.get_node(host=first.host, port=first.port)
            if asked is None:
                await _arelearn(cluster)
        elif isinstance(first, (MovedError, ClusterDownError)):
            await _arelearn(cluster)
        elif isinstance(first, TryAgainError):
            await asyncio.sleep(_TRY_AGAIN_PAUSE)
        else:
            return replies
    return replies


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
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                if index < step:
                    raise ReplyLost(str(exc)) from exc
                await connection.disconnect()
                replies += [exc] * (len(sent) - index)
                break
    except BaseException:
        await connection.disconnect()  # a reply left unread must not reach the next caller
        raise
    finally:
        node.release(connection)
    return replies[step - 1::step]


async def _arelearn(cluster: Any) -> None:
    try:
        await cluster.nodes_manager.initialize()
    except (redis.RedisError, RedisClusterException, OSError):
        pass  # the caller's own error says what failed; the next call tries again


def _unwritten(exc: BaseException) -> bool:
    """Whether a failure left the script call unwritten (a connection refused, a write
    cut before the call went whole), so that sending it again is harmless."""
    return isinstance(exc, redis.ConnectionError) and not isinstance(exc, ReplyLost)


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
