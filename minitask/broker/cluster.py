"""Blocking waits on wake keys that live on different Redis Cluster nodes.

A worker serving several queues blocks until any of them may have work. On
one Redis that is one BLPOP over every wake key; on a cluster each queue's
keys live in their own hash slot, and Redis refuses a command whose keys span
slots (CROSSSLOT), even on one node. So a waiter keeps one outstanding BLPOP
per slot, each on a connection of its own to the node serving that slot, and
waits on all their sockets at once: no polling, one blocked call per queue
every few seconds, and a wake-up as soon as any queue gets a token. After any
wake-up the worker fetches from every queue in order, so no queue is starved
by another's tokens.

``wait_readable`` is the one way minitask waits on a socket, here and in the
transport.
"""
from __future__ import annotations

import errno
import os
import select
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import redis
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError, TryAgainError

from .wake_tokens import taken

#: Pause after an ASK or TRYAGAIN reply (a slot being migrated) before the
#: worker fetches again: the migration is short, a hot loop would not be.
MIGRATION_PAUSE = 0.05
#: poll() counts whole milliseconds.
_MS = 0.001


def wait_readable(fds: Sequence[int], deadline: float) -> List[int]:
    """The file descriptors among ``fds`` that are readable, waiting for one until
    ``time.monotonic()`` reaches ``deadline``; [] when none became readable in time.

    poll(), not select(): select() refuses descriptors from 1024 (FD_SETSIZE)
    up, and a process holding many open files gets such numbers for every new
    socket. poll() counts whole milliseconds and Python rounds a fraction up,
    which would end a wait up to 1 ms late: so it waits the whole milliseconds
    left, rounded down, then sleeps the fraction (clock_nanosleep is precise to
    the microsecond) and looks once more. A delayed task thus starts neither
    early nor late. A closed descriptor is an error, as select() made it.
    """
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    while True:
        remaining = deadline - time.monotonic()
        if remaining >= _MS:
            events = poller.poll(int(remaining / _MS))
        else:
            if remaining > 0:
                time.sleep(remaining)
            events = poller.poll(0)
        if any(event & select.POLLNVAL for _, event in events):
            raise OSError(errno.EBADF, "a watched file descriptor was closed")
        if events or remaining < _MS:
            # POLLHUP and POLLERR count as readable: the read then says what broke
            return [fd for fd, _ in events]


@dataclass
class _Blocked:
    """One slot's BLPOP: the node it went to, its connection, whether it is pending."""

    keys: List[str]
    node: str
    connection: Any
    outstanding: bool = False


class ClusterWaiter:
    """One thread's outstanding BLPOPs on a cluster, one per hash slot."""

    def __init__(self, client: redis.RedisCluster) -> None:
        self.client = client
        self.pid = os.getpid()
        self._blocked: Dict[int, _Blocked] = {}
        self._stale = False
        self._took: List[str] = []

    def wait(self, keys: Sequence[str], timeout: float, block_seconds: float,
             interrupt: Optional[int] = None) -> bool:
        """Block until a token is popped from one of ``keys``, ``timeout`` passes, or
        the file descriptor ``interrupt`` becomes readable.

        As on a single Redis, a BLPOP left pending when this thread's timer runs
        out stays outstanding for the next call; ``stop`` drops them all.
        Returns True when woken (or when a slot is moving: fetch to find out).
        """
        try:
            self._send(keys, block_seconds)
            return self._collect(time.monotonic() + min(max(timeout, 0.0), block_seconds),
                                 interrupt)
        except MovedError:
            # the slot now lives elsewhere (resharding, failover): read the map again
            self.stop()
            self._stale = True
            return True
        except (AskError, TryAgainError):
            # the slot is being migrated: its keys are split between two nodes
            self.stop()
            time.sleep(min(max(timeout, 0.0), MIGRATION_PAUSE))
            return True
        except BaseException:
            # a reply left unread must not reach the next caller; the slot map may
            # be stale (MOVED, a node down or failed over): read it again next time
            self.stop()
            self._stale = True
            raise

    def took(self) -> List[str]:
        """The wake lists the waits took a token off since last asked."""
        keys, self._took = self._took, []
        return keys

    def disconnect(self) -> None:
        """Close every connection of this waiter (``Transport.close``)."""
        for blocked in self._blocked.values():
            blocked.connection.disconnect()
        self._blocked.clear()

    def stop(self) -> None:
        """Drop every outstanding BLPOP, so that tokens go to idle workers."""
        for blocked in self._blocked.values():
            if blocked.outstanding:
                blocked.outstanding = False
                blocked.connection.disconnect()

    def _send(self, keys: Sequence[str], block_seconds: float) -> None:
        if self._stale:
            self.client.nodes_manager.initialize()
            self._stale = False
        by_slot: Dict[int, List[str]] = {}
        for key in keys:
            by_slot.setdefault(key_slot(key.encode()), []).append(key)
        for slot in list(self._blocked):
            if slot not in by_slot:
                self._blocked.pop(slot).connection.disconnect()
        manager = self.client.nodes_manager
        for slot, slot_keys in by_slot.items():
            node = manager.get_node_from_slot(slot)
            blocked = self._blocked.get(slot)
            if blocked is not None and (blocked.node != node.name or blocked.keys != slot_keys):
                blocked.connection.disconnect()
                blocked = None
            if blocked is None:
                pool = self.client.get_redis_connection(node).connection_pool
                blocked = self._blocked[slot] = _Blocked(slot_keys, node.name,
                                                         pool.make_connection())
            if not blocked.outstanding:
                blocked.connection.send_command("BLPOP", *slot_keys, block_seconds)
                blocked.outstanding = True

    def _collect(self, deadline: float, interrupt: Optional[int]) -> bool:
        pending = [b for b in self._blocked.values() if b.outstanding]
        watched = [b.connection._sock.fileno() for b in pending]
        if interrupt is not None:
            watched.append(interrupt)
        while True:
            # can_read() first: a reply may already sit in a parser or TLS buffer
            ready = [b for b in pending if b.connection.can_read(timeout=0)]
            if ready:
                break
            if deadline <= time.monotonic():
                return False  # our timer ran out first; the BLPOPs stay outstanding
            if interrupt in wait_readable(watched, deadline):
                return False  # interrupted; the BLPOPs stay outstanding
        woken = False
        for blocked in ready:
            blocked.outstanding = False
            reply = blocked.connection.read_response()
            key = taken(reply)  # an element no minitask pushed is said (once a minute a key)
            if key is not None:
                self._took.append(key)
            woken = reply is not None or woken
        return woken
