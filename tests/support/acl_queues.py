"""An ACL user whose key patterns cover some queues of an app only (issue 29, M1):
``~minitask:{app:queue}:*`` for each of them and ``~minitask:{app}:*`` (the app's own
keys), every command and channel."""
from __future__ import annotations

import redis

from tests.support.acl import acl_user
from tests.support.servers import RedisServer

USER = "queueuser"


def queue_user(admin: "redis.Redis[bytes]", server: RedisServer, app: str,
               *queues: str) -> str:
    """The URL of ``USER``, set afresh: it may use the keys of ``queues`` of ``app`` and
    the app's own keys, no other."""
    patterns = [f"~minitask:{{{app}:{queue}}}:*" for queue in queues]
    return acl_user(admin, server, USER, *patterns, f"~minitask:{{{app}}}:*", "&*", "+@all")


def widen(admin: "redis.Redis[bytes]", app: str, queue: str) -> None:
    """Let ``USER`` use the keys of ``queue`` of ``app`` too (the ACL fixed)."""
    admin.execute_command("ACL", "SETUSER", USER, f"~minitask:{{{app}:{queue}}}:*")


def all_but_results(admin: "redis.Redis[bytes]", server: RedisServer, app: str,
                    queue: str, start: str) -> str:
    """The URL of ``USER``, set afresh: it may use every key of ``queue`` of ``app`` but
    the results of the tasks whose id starts with ``start`` (one character; an ACL
    has no "all but": the other keys are spelled out by their first letters), and the
    app's own keys."""
    base = f"minitask:{{{app}:{queue}}}:"
    patterns = [f"~{base}[^r]*", f"~{base}r[^e]*", f"~{base}re[^s]*", f"~{base}res[^u]*",
                f"~{base}result:[^{start}]*"]
    return acl_user(admin, server, USER, *patterns, f"~minitask:{{{app}}}:*", "&*", "+@all")
