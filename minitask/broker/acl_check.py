"""Before a client's first script that sends tasks: may its ACL user run every command
those scripts call?

Redis checks a script's commands against the ACL one at a time, as the script comes to
each, never when it starts: a user without ``DEL`` had enqueue.lua store a delayed
task's message, then refused the ``DEL`` before the ``ZADD`` that schedules it. The task
sat in no queue, never to run, its ``status()`` "queued", and a resend with its
``task_id=`` found the message and did nothing (issue 29). So the first send of each
client asks Redis (7.0 and later: ``redis.acl_check_cmd``) about all of them at once,
and a user missing any is refused before anything is written. Once the check passed, it
is not asked again: the hot path pays one attribute read. On Redis Cluster each primary
node is asked before the first send to it (ACLs are each node's own). Redis 6.2 has no
way to ask; there a refusal part way is still told as such (``BrokerError.part_way``).
"""
from __future__ import annotations

import hashlib
import re
import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set

import redis

from ..errors import BrokerError

#: The scripts that write tasks (enqueue, a workflow's steps and groups, a broadcast
#: call): one refused part way through (``errors.refused_in_script``) may have written.
SENDING_SCRIPTS = frozenset({"enqueue", "enqueue_now", "enqueue_flow", "enqueue_group",
                             "spawn", "spawn_flow", "spawn_group", "group_create",
                             "broadcast_send"})

#: The scripts before whose first call the check runs, and whose commands it asks
#: about: those that send tasks, and a workflow's step id reservations (ahead of its
#: steps; a failed send releases them with DEL, which a user without it could not).
CHECKED = SENDING_SCRIPTS | {"step_ids"}

#: A command a script may call: every quoted upper-case word ('ZADD'), but those of
#: ``NOT_COMMANDS``. A script names some where it does not call them (lib.lua's
#: must(kind, 'LLEN', ...), per_thousand('ZREM', ...), a table read as reads[kind]):
#: a pattern of the calls missed those, and the check never asked about them.
SCRIPT_COMMAND = re.compile(r"'([A-Z][A-Z]+)'")

#: The quoted upper-case words of the scripts that are no command: a command's
#: arguments (ZRANGE's WITHSCORES), subcommands (XINFO STREAM, MEMORY USAGE) and
#: Redis's error code (tests/unit: every other word of every script is a command of the
#: documented ACL list).
NOT_COMMANDS = frozenset({"bylex", "count", "gt", "limit", "lt", "maxlen", "nomkstream",
                          "nx", "px", "rank", "samples", "stream", "usage", "withscores",
                          "wrongtype", "xx"})

#: Commands the docs let a user go without (guide/scaling): not asked about. TIME is
#: called by broadcast_send.lua (its prune, before any write) and by the worker's fetch.
OPTIONAL = frozenset({"time"})

#: Which of ARGV the user may not run on key KEYS[1] (the send's own: its node on
#: Redis Cluster, its key patterns checked too); false where Redis cannot say (6.2).
#: Each command is asked with that key in every argument place: Redis reads a command's
#: keys from its arguments, and a command asked alone made Redis 7.0.15 read past them
#: and crash (a user with key patterns). Every command asked takes its keys at fixed
#: places or from a place to the end: each is that key.
CHECK_SOURCE = """\
if not redis.acl_check_cmd then return false end
local missing = {}
local k = KEYS[1]
for i = 1, #ARGV do
  if not redis.acl_check_cmd(ARGV[i], k, k, k, k, k, k) then
    missing[#missing + 1] = ARGV[i]
  end
end
return missing
"""
CHECK_SHA = hashlib.sha1(CHECK_SOURCE.encode()).hexdigest()


def commands_of(sources: Iterable[str]) -> List[str]:
    """The commands the script texts ``sources`` call, lower case, sorted."""
    return sorted({name.lower() for text in sources for name in SCRIPT_COMMAND.findall(text)}
                  - NOT_COMMANDS)


def missing_commands(reply: Optional[Sequence[bytes]]) -> Optional[List[str]]:
    """The check's reply as the commands the user lacks; None: Redis could not say."""
    if reply is None:
        return None
    return [name.decode() if isinstance(name, bytes) else str(name) for name in reply]


def refused_before_writing(missing: Sequence[str], key: str, what: str,
                           broker: str) -> BrokerError:
    """The error of a send refused by the check: nothing written, what to add."""
    rules = " ".join(f"+{name}" for name in missing)
    return BrokerError(
        f"could not {what} (broker {broker}): the ACL user may not run "
        f"{', '.join(name.upper() for name in missing)} (on key {key!r}), which minitask's "
        f"scripts that send tasks call; Redis checks a script's commands only as it comes "
        f"to each, and one refused after the script's first write would leave a task "
        f"stored but in no queue, so no task was written; add {rules} (and keys "
        f"~minitask:*); minitask needs every command of the ACL list on the docs' Scaling "
        f"out page (guide/scaling)", reason="permission", sent=False)


def sending_key(calls: Sequence[Any]) -> Optional[str]:
    """The first key of the first of ``calls`` (``ScriptCall``s) that is ``CHECKED``,
    where the check goes (its node on Redis Cluster); None: none of them is."""
    return next(iter(sending_keys(calls)), None)


def sending_keys(calls: Sequence[Any]) -> List[str]:
    """The first key of each of ``calls`` that is ``CHECKED``, in order (on Redis Cluster
    each goes to its own node, whose ACL is its own)."""
    keys: List[str] = []
    for name, _, static_keys, tail, dynamic in calls:
        if name in CHECKED:
            first = [*static_keys, *tail[:dynamic]]
            keys.append(str(first[0]) if first else "minitask")
    return keys


def check_args(sources: Dict[str, str], key: str) -> List[Any]:
    """EVALSHA's arguments after the sha: one key, then every command of the ``CHECKED``
    scripts among ``sources`` (each script's text as it runs, by name)."""
    commands = commands_of(text for name, text in sources.items() if name in CHECKED)
    return [1, key, *(name for name in commands if name not in OPTIONAL)]


def require_commands(client: Any, sources: Dict[str, str], key: str, what: str,
                     broker: str) -> None:
    """Ask Redis (``client``, blocking) which commands of the sending scripts the user
    lacks; raise ``refused_before_writing`` naming them, if any. Redis's own errors go
    up as they are (the caller words them: nothing was written)."""
    args = check_args(sources, key)
    try:
        reply = client.evalsha(CHECK_SHA, *args)
    except redis.exceptions.NoScriptError:
        client.script_load(CHECK_SOURCE)
        reply = client.evalsha(CHECK_SHA, *args)
    missing = missing_commands(reply)
    if missing:
        raise refused_before_writing(missing, key, what, broker)


async def arequire_commands(client: Any, sources: Dict[str, str], key: str, what: str,
                            broker: str) -> None:
    """``require_commands`` on an asyncio client."""
    args = check_args(sources, key)
    try:
        reply = await client.evalsha(CHECK_SHA, *args)
    except redis.exceptions.NoScriptError:
        await client.script_load(CHECK_SOURCE)
        reply = await client.evalsha(CHECK_SHA, *args)
    missing = missing_commands(reply)
    if missing:
        raise refused_before_writing(missing, key, what, broker)


class SenderChecks:
    """Where a client's check passed: its server, or on Redis Cluster each primary node
    asked (``host:port``), whose ACL is its own and not copied to the others, so a node
    is asked before the first send that goes to it. A refusal part way (the ACL changed)
    forgets them all and bumps ``generation``: a check that passed meanwhile, in another
    thread, counts for nothing."""

    def __init__(self, cluster: bool) -> None:
        self.cluster = cluster
        self.nodes: Set[str] = set()
        self.generation = 0
        self.lock = threading.Lock()


def node_of(owner: Any, key: str) -> str:
    """The node (``host:port``) the check for ``key`` goes to: "" but on Redis Cluster
    (``owner``: a transport, or an asyncio store)."""
    if not owner.acl_checks.cluster:
        return ""
    return str(owner.client.get_node_from_key(key).name)


def check_sender(transport: Any, calls: Sequence[Any], what: str) -> None:
    """Before a transport's first call of a script that sends tasks (on Redis Cluster:
    the first to each node), every node ``calls`` send to checked before any is run."""
    checks: SenderChecks = transport.acl_checks
    generation = checks.generation
    for key in sending_keys(calls)[:None if checks.cluster else 1]:
        node = node_of(transport, key)
        if node in checks.nodes:
            continue
        with transport.errors(what):
            require_commands(transport.client, transport.sources, key, what,
                             transport.description)
        if not _passed(transport, generation, node):
            return


async def acheck_sender(store: Any, calls: Sequence[Any], what: str) -> None:
    """``check_sender`` of an asyncio store (stores/aio.py: ``acl_checks`` its own)."""
    checks: SenderChecks = store.acl_checks
    generation = checks.generation
    for key in sending_keys(calls)[:None if checks.cluster else 1]:
        with store.errors(what):
            if checks.cluster:
                await store.client.initialize()  # its slots read (a no-op once done)
            node = node_of(store, key)
            if node in checks.nodes:
                continue
            await arequire_commands(store.client, store.broker.transport.sources, key, what,
                                    store.description)
        if not _passed(store, generation, node):
            return


def _passed(owner: Any, generation: int, node: str) -> bool:
    """Note the check of ``node`` passed, unless a refusal part way came since it began
    (``generation``: the ACL changed, ask again next time): whether it was noted."""
    checks: SenderChecks = owner.acl_checks
    with checks.lock:
        if checks.generation != generation:
            return False
        checks.nodes.add(node)
        # on Redis Cluster each send asks whether its node was checked
        owner.acl_unchecked = checks.cluster
        return True


def check_again(owner: Any, error: BrokerError) -> None:
    """After ``error``, if a refusal part way through a sending script: the ACL changed
    since the check (or Redis 6.2 could not be asked), so the next send is checked
    again."""
    if not error.part_way:
        return
    checks: SenderChecks = owner.acl_checks
    with checks.lock:
        checks.generation += 1
        checks.nodes.clear()
        owner.acl_unchecked = True
