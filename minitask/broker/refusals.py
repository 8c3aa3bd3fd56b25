"""How a redis-py error is worded as a :class:`~minitask.errors.BrokerError`: what kind
of failure it is (``reason``), what to do about it (the hint), and what a refusal part
way through a script may have left.

redis-py's errors are told apart by their class names and Redis's text, so that the
wording stays the same whichever client class raised them.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

from ..errors import BrokerError

_ACL_LIST = "the ACL list on the docs' Scaling out page (guide/scaling)"
#: How Redis names the command an ACL refused: "... to run the 'zadd' command".
_REFUSED_COMMAND = re.compile(r"'([\w|]+)' command")
#: The marks of an error raised inside a script: Redis 6.2 wraps it ("Error running
#: script ..."), 7 appends "script: <sha>, on @user_script:<line>."; minitask's own
#: refusals name "minitask key".
_SCRIPT_MARKS = ("Error running script", "user_script", "script: ", "minitask key")
#: Refusals of the whole server, whatever the key: a wait ends them, never a key's fix.
_SERVER_REFUSALS = (
    ("NOREPLICAS", "Redis refuses writes while fewer replicas than min-replicas-to-write "
                   "are connected: bring the replicas back, or lower that setting"),
    ("MISCONF", "Redis refuses writes since it cannot persist (a failed RDB snapshot, "
                "stop-writes-on-bgsave-error): fix its disk or its configuration"),
    ("MASTERDOWN", "this replica lost its link to the primary and serves no stale data: "
                   "bring the primary back, or point minitask at the primary"),
)


def _names(exc: BaseException) -> set[str]:
    """The class names of ``exc`` and its bases: redis-py's errors are told apart
    by name, whichever client class raised them."""
    return {cls.__name__ for cls in type(exc).__mro__}


def broker_reason(exc: BaseException, script: Optional[str] = None,
                  commands: Sequence[str] = ()) -> Tuple[str, str]:
    """What kind of failure redis-py's ``exc`` is, and what to do about it.

    Args:
        exc: the error of a call to Redis.
        script: the minitask script the call ran, if it ran one (``fetch``...).
        commands: the commands that script calls: inside a script, Redis does not
            say which one an ACL refused.

    Returns:
        ``(reason, hint)``: ``reason`` as on :class:`BrokerError`; ``hint`` a
        sentence fitting it ("" when there is nothing better to say).
    """
    names, text = _names(exc), str(exc)
    if ({"AuthenticationError", "AuthenticationWrongNumberOfArgsError"} & names
            or "WRONGPASS" in text or "NOAUTH" in text):
        return "auth", ("Redis refused the credentials: check the user name and password "
                        "of the broker URL (percent-encode '@', ':' and '/' in them)")
    if ({"NoPermissionError", "AuthorizationError"} & names or "NOPERM" in text
            or "no permissions" in text.lower() or "can't run this command" in text
            or "can't access" in text):
        command = _REFUSED_COMMAND.search(text)
        if command:
            name = command.group(1)
            missing = f"the ACL user may not run {name.upper()}: add +{name}"
        elif "key" in text.lower():
            missing = "the ACL user may not use minitask's keys: add ~minitask:*"
        elif commands:
            missing = (f"the ACL user may not run one of the commands of minitask's "
                       f"{script}.lua: " + " ".join(f"+{name}" for name in commands))
        else:
            missing = "the ACL user lacks a command minitask sends"
        return "permission", f"{missing}; minitask needs every command of {_ACL_LIST}"
    if "OutOfMemoryError" in names or "OOM command not allowed" in text:
        return "out of memory", (
            "Redis is out of memory (used memory over maxmemory) and refuses writes: raise "
            "maxmemory or free memory; keep maxmemory-policy noeviction, which minitask "
            "needs (a full Redis then refuses writes instead of evicting tasks)")
    if script and "not enough memory" in text:  # Lua's allocator: the server's, no key's
        return "out of memory", (
            "Redis could not give a script's Lua the memory it asked for: check the "
            "server's free memory; no key of minitask's is at fault")
    if "ReadOnlyError" in names or "READONLY" in text:
        return "read-only", (
            "this Redis is a read-only replica, as after a failover: point minitask at the "
            "primary, or use a redis+sentinel:// URL to follow failovers")
    if "InvalidResponse" in names:  # redis-py's own: no refusal of a Redis's
        return "unreachable", (
            "the reply could not be read as a Redis reply: check that the broker URL's "
            "host and port are a Redis server's, not another service's (an HTTP server, "
            "say), and that no proxy between them alters replies")
    if "Protocol error" in text:  # the server's: it could not read the command
        return "protocol", (
            "Redis refused a command it could not read and closed the connection; a value "
            "longer than the server's proto-max-bulk-len (a managed Redis may set it low) "
            "says \"invalid bulk length\": keep max_message_bytes and max_result_bytes "
            "below it")
    if redirects_exhausted(exc):
        return "error", (
            "Redis Cluster kept redirecting the command (MOVED, ASK) more times than the "
            "client follows: slots are moving (a reshard or a failover); it did not run, "
            "and a retry once they settle succeeds")
    if "DB index is out of range" in text:  # SELECT, as a connection is made
        return "error", ("the broker URL's database number (its /N) is past the "
                         "server's: Redis has as many as its databases setting (16 by "
                         "default), numbered from 0")
    for mark, hint in _SERVER_REFUSALS:  # the whole server's state, in a script or not
        if mark in text:
            return "error", hint
    if "ResponseError" in names and script and any(mark in text for mark in _SCRIPT_MARKS):
        return "script", (
            f"a script error in minitask's {script}.lua: most likely, data that minitask "
            "did not write sits in its keys; inspect the key named, then rename or "
            "delete it")
    if "WRONGTYPE" in text:
        return "wrong type", (
            "a key of minitask holds another type than minitask keeps there (data it did "
            "not write): inspect the queue's keys (minitask:{app:queue}:*), then rename or "
            "delete the one of another type")
    if "MaxConnectionsError" in names or "No connection available" in text:
        # the client's own limit, not the server's: a wait (or a larger pool) ends it
        return "pool exhausted", (
            "every connection of the Redis client's pool is in use (Redis itself is not "
            "at fault): raise the pool's max_connections (?max_connections=N in the broker "
            "URL, 100 by default; ?timeout=S sets how long a call waits for a free one) "
            "and Redis's maxclients to match, or make fewer calls at once")
    if ({"ConnectionError", "TimeoutError", "RedisClusterException", "OSError"} & names):
        return "unreachable", "is Redis running and reachable?"
    return "error", ""


#: What Redis adds to the error of a script, which tells a reader nothing (the hint names
#: minitask's script): 7's " script: <sha>, on @user_script:<line>." and 6.2's
#: "Error running script (call to f_<sha>): @user_script:<line>: " (probe 29h, M1).
_SCRIPT_NOISE = re.compile(r"\s*script: [0-9a-f]{40}, on @user_(?:script|function):\d+\.?"
                           r"|Error running script \(call to f_[0-9a-f]{40}\): "
                           r"@user_(?:script|function):\d+: ")


#: How redis-py says the server closed the connection (at a read: the command sent).
_CLOSED_BY_SERVER = "Connection closed by server"
#: Said of a reply lost so: Redis closes a client whose reply is over its
#: client-output-buffer-limit, which a task of a huge message meets at each fetch of it
#: (probe35 M1: "lost Redis" alone sent the operator to look at the network).
CLOSED_AS_IT_REPLIED = ("; Redis closed the connection before its reply came, as it does "
                        "when a reply is over its client-output-buffer-limit (a task of a "
                        "huge message, say, at each fetch of it)")
#: How Redis says that an ACL refused a command a script called, part way through the
#: script (6.2 and 7.0; 7.2 and later): Redis checks the ACL at each command, so what
#: the script wrote before it stands.
_REFUSED_IN_SCRIPT = ("user executing the script", "ACL failure in script")


#: What a send refused part way through its script left, and what mends it: the
#: sending scripts write the message that makes a task's id pending after every write
#: that queues it (issue 29), so a task it had not finished is at most an id in a queue
#: with no message, and a resend by id queues it once.
PART_WAY = ("a task it had not finished is left not pending (at most its id in a queue "
            "with no message, which a fetch drops), one it finished is queued and runs: "
            "once the ACL user may run every command of the list, send it again with the "
            "same task_id= (the error's task_ids), which queues each task it had not "
            "finished once and never a task twice")
#: The same of a workflow's start (its steps: spawn.lua and those built on it), whose
#: error goes on to say how to check the workflow before sending it again.
PART_WAY_WORKFLOW = ("a step it sent runs, one it had not finished is left unsent (at "
                     "most its id in a queue with no message, which a fetch drops)")
#: The scripts of a workflow's start, told ``PART_WAY_WORKFLOW``.
_WORKFLOW_SCRIPTS = frozenset({"spawn", "spawn_flow", "spawn_group", "group_create"})
#: The same of a broadcast call (broadcast_send.lua), whose handle is its own.
PART_WAY_BROADCAST = (
    "a broadcast call written in part may be logged yet reach no subscriber, and sending "
    "it again with its task_id= finds it logged and sends nothing; once the ACL user may "
    "run every command of the list, check the error's task_ids with "
    "minitask.BroadcastHandle(app.broker, queue, id).status() (app.handle(id) knows no "
    "broadcast call): one its subscribers' workers never ran was written in part: send "
    "it again under a new task id")


def redirects_exhausted(exc: BaseException) -> bool:  # (redirected past redis-py's limit)
    return type(exc).__name__ == "ClusterError" and "TTL exhausted" in str(exc)


def refused_in_script(exc: BaseException) -> bool:
    """Whether ``exc`` is a command refused inside a script (an ACL): the script may have
    written before it (``enqueue_now.lua`` writes the message, then trims the wake list)."""
    return any(mark in str(exc) for mark in _REFUSED_IN_SCRIPT)


def _part_way(script: Optional[str]) -> str:
    """What a refusal part way through ``script`` left, and what mends it."""
    if script == "broadcast_send":
        return PART_WAY_BROADCAST
    return PART_WAY_WORKFLOW if script in _WORKFLOW_SCRIPTS else PART_WAY


def without_script_marks(text: str) -> str:
    """Redis's error ``text`` without the script's sha and line it adds."""
    return _SCRIPT_NOISE.sub("", text)


def broker_error(exc: BaseException, what: str, broker: str, *,
                 script: Optional[str] = None, commands: Sequence[str] = (),
                 unreachable: str = "", sent: bool = False) -> BrokerError:
    """The :class:`BrokerError` for redis-py's ``exc``, raised while trying to ``what``.

    Args:
        exc: the error.
        what: a verb phrase ("enqueue into queue 'emails'").
        broker: the broker's description, password already hidden.
        script: the minitask script the call ran, if any, and ``commands``, those
            it calls.
        unreachable: said after the hint when Redis could not be reached.
        sent: the connection failed after the command was written whole, before
            its reply came: Redis may have run it (said so; ``BrokerError.sent``); or
            (``refused_in_script``) Redis refused a command inside a script that
            writes, which may have written before it.
    """
    reason, hint = broker_reason(exc, script, commands)
    if reason == "unreachable" and unreachable:
        hint = f"{hint} {unreachable}"
    if sent and refused_in_script(exc):
        message = (f"Redis refused a command part way through the script to {what} (broker "
                   f"{broker}): {without_script_marks(str(exc))}: what the script wrote "
                   f"before that command stands, so its write may have been made, in part "
                   f"or whole: "
                   f"{_part_way(script)}")
    elif sent:
        message = (f"lost the reply to {what} (broker {broker}): "
                   f"{without_script_marks(str(exc)).rstrip('. ')}: the connection failed "
                   f"after the command was written, so Redis may have run it"
                   f"{CLOSED_AS_IT_REPLIED if _CLOSED_BY_SERVER in str(exc) else ''}")
    else:
        message = f"could not {what} (broker {broker}): {without_script_marks(str(exc))}"
    # redis-py ends many of its errors with "." ("... Connection refused."): not ".;"
    error = BrokerError(f"{message.rstrip('. ')}; {hint}" if hint else message,
                        reason=reason, sent=sent)
    error.part_way = sent and refused_in_script(exc)
    error.moving = redirects_exhausted(exc)
    return error
