"""What the tests of a script refused part way share (issue 29: an ACL changed at run
time; Redis refuses a command inside a script as the script comes to it and keeps the
writes made before): two apps on one manual clock, the second as ACL user ``limited``
(``plain_and_limited``), a command taken from that user for a while (``taken_away``),
a call made meanwhile (``refused_part_way``), and fetches and acks made as a worker
makes them while commands are taken away (``fetched_while_refused``, ``acked``,
``drained``)."""
from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

import redis

from minitask import BrokerError, Minitask
from tests.support.acl import user_without
from tests.support.clock import ManualClock
from tests.support.refused_fetches import fetched
from tests.support.servers import RedisServer

#: The ACL user the second app of ``plain_and_limited`` is.
LIMITED = "limited"


@contextmanager
def plain_and_limited(server: RedisServer, make: Callable[[Any, ManualClock], Minitask]
                      ) -> Iterator[Tuple[Minitask, Minitask, "redis.Redis[bytes]"]]:
    """Two apps ``make(broker, clock)`` on one ManualClock set at now: the first as the
    default user of ``server``, the second as ACL user ``limited`` (every command allowed
    until a test takes one away); and an admin client. All closed after."""
    admin: "redis.Redis[bytes]" = server.client()
    url = user_without(admin, server, "nothing", user=LIMITED)
    clock = ManualClock(int(time.time() * 1000))
    plain, limited = make(server.client(), clock), make(url, clock)
    try:
        yield plain, limited, admin
    finally:
        plain.close()
        limited.close()
        admin.close()


@contextmanager
def taken_away(admin: "redis.Redis[bytes]", command: str, user: str = LIMITED
               ) -> Iterator[None]:
    """ACL user ``user`` may not run ``command`` within; it is given back after, whatever
    happened."""
    admin.execute_command("ACL", "SETUSER", user, f"-{command}")
    try:
        yield
    finally:
        admin.execute_command("ACL", "SETUSER", user, f"+{command}")


def refused_part_way(admin: "redis.Redis[bytes]", command: str, call: Callable[[], Any],
                     *words: str) -> bool:
    """Whether Redis refused ``call()``, made while ``command`` is taken away from user
    ``limited``: the BrokerError it raised must say NOPERM, one of ``words``, or name
    ``command``."""
    with taken_away(admin, command):
        try:
            call()
        except BrokerError as exc:
            text = str(exc)
            assert "NOPERM" in text or any(word in text for word in words) \
                or command in text.lower(), exc
            return True
    return False


def acked(app: Minitask, task_ids: Iterable[str]) -> List[str]:
    """Those of ``task_ids`` (of queue ``default``) whose ack, made as a worker makes it
    (no result), Redis took; a refused one's lease expires: it is delivered again."""
    done = []
    for task_id in task_ids:
        try:
            app.broker.results.ack("default", task_id, None, 0)
        except BrokerError:
            continue
        done.append(task_id)
    return done


def fetched_while_refused(app: Minitask, admin: "redis.Redis[bytes]", commands: Sequence[str],
                          fetches: int, now_ms: int, *, max_deliveries: int = 5,
                          after: Optional[Callable[[int], None]] = None
                          ) -> Tuple[List[str], int]:
    """``fetches`` fetches (``fetched``: five tasks, leased 1 s), 10 ms apart from
    ``now_ms``, each fetched task acked (``acked``), with ``commands`` taken from user
    ``limited`` from the second fetch on and given back after; a refused fetch fetched
    nothing (the leases it took are lost with the reply: they expire). ``after(n)`` runs
    after the acks of fetch ``n`` (0-based). Returns the ids acked, and the clock 2 s
    after the last fetch: the leases taken while refused have expired."""
    done: List[str] = []
    with ExitStack() as given_back:
        for tick in range(fetches):
            if tick == 1:
                for command in commands:
                    given_back.enter_context(taken_away(admin, command))
            try:
                got = fetched(app, now_ms, 1_000, max_deliveries=max_deliveries)
            except BrokerError:
                got = []
            now_ms += 10
            done += acked(app, got)
            if after is not None:
                after(tick)
    return done, now_ms + 2_000


def drained(app: Minitask, now_ms: int, task_ids: Iterable[str], *, max_deliveries: int = 5,
            fetches: int = 80) -> List[str]:
    """The ids acked (``acked``) of fetches (``fetched``: five tasks, leased 600 s) 10 ms
    apart from ``now_ms`` (the rate limits' windows pass), until every one of
    ``task_ids`` was, ``fetches`` at most."""
    wanted = set(task_ids)
    done: List[str] = []
    for _ in range(fetches):
        done += acked(app, fetched(app, now_ms, max_deliveries=max_deliveries))
        now_ms += 10
        if set(done) >= wanted:
            break
    return done
