"""What the tests of a script refused part way share (issue 29: an ACL changed at run
time; Redis refuses a command inside a script as the script comes to it and keeps the
writes made before): two apps on one manual clock, the second as ACL user ``limited``
(``plain_and_limited``), a command taken from that user for a while (``taken_away``),
and a call made meanwhile (``refused_part_way``)."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Tuple

import redis

from minitask import BrokerError, Minitask
from tests.support.acl import user_without
from tests.support.clock import ManualClock
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
