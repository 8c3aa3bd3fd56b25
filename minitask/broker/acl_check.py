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
node is asked before the first send to it (ACLs are each node's own), and once every
primary passed, a send asks nothing more until the client's layout changes (redis-py
reads it again, or follows a MOVED: ``watch_layout``): the next send then looks up the
node of each of its keys again, and a node made primary since (a failover, a slot moved
to a new node) is asked before a send goes to it; nodes that passed are not asked
again. (A write redirected mid-send, an ASK to a node importing the slot, or the retry
of a send whose primary failed, reaches the new node before its check: the next send
asks it.) Redis 6.2 has no
way to ask; there a refusal part way is still told as such (``BrokerError.part_way``).

A worker asks the same once as it starts, before it leases anything, about every
command of all its scripts and of those it sends itself (``worker_commands``:
worker/acl_start.py), and the ops commands that write about their scripts'
(cli/options.py ``require_acl``), each command with the arguments it is asked with.
All three ask node by node (``check_nodes``) with one script (``CHECK_SOURCE``, run as
the transport's scripts are: loaded again on NOSCRIPT), each command with as many arguments
as Redis takes of it (acl_arguments.py): one asked with more or fewer fails the whole
check on a Redis that checks the arity first (redis/redis#14847), one with fewer
crashed Redis 7.0.15.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import re
import threading
from typing import (Any, Callable, ContextManager, Dict, Iterable, List, Optional,
                    Sequence, Set, Tuple)

from redis.commands.core import AsyncScript, Script
from redis.crc import key_slot

from ..errors import BrokerError
from .acl_arguments import with_the_key

try:  # (redis-py 5 and later: a client says when it reads its layout again)
    from redis import event as redis_events
except ImportError:  # pragma: no cover
    redis_events = None  # type: ignore[assignment]


#: The scripts that write tasks (enqueue, a workflow's steps and groups, a broadcast
#: call): one refused part way through (``refusals.refused_in_script``) may have written.
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
#: Redis's error codes (tests/unit: every other word of every script is a command of the
#: documented ACL list).
NOT_COMMANDS = frozenset({"bylex", "count", "gt", "limit", "lt", "maxlen", "nomkstream",
                          "noperm", "nx", "px", "rank", "samples", "stream", "usage",
                          "withscores", "wrongtype", "xx"})

#: Commands the docs let a user go without (guide/scaling): not asked about. TIME is
#: called by broadcast_send.lua (its prune, before any write) and by the worker's fetch.
OPTIONAL = frozenset({"time"})

#: Which commands the user may not run on key KEYS[1] (the one a send or a worker uses
#: first: its node on Redis Cluster, its key patterns checked too). ARGV: for each
#: command, the count of its words, then the words (a subcommand its own word; '' the
#: key). The reply: the positions (from 1) of those the user may not run; false where
#: Redis cannot say (6.2).
CHECK_SOURCE = """\
if not redis.acl_check_cmd then return false end
local missing = {}
local k = KEYS[1]
local i, n = 1, 0
while i <= #ARGV do
  local words = {}
  for j = 1, tonumber(ARGV[i]) do
    local word = ARGV[i + j]
    words[j] = word == '' and k or word
  end
  n = n + 1
  if not redis.acl_check_cmd(unpack(words)) then missing[#missing + 1] = n end
  i = i + #words + 1
end
return missing
"""
#: Its SHA1, as EVALSHA and SCRIPT EXISTS name it.
CHECK_SHA = hashlib.sha1(CHECK_SOURCE.encode()).hexdigest()


def commands_of(sources: Iterable[str]) -> List[str]:
    """The commands the script texts ``sources`` call, lower case, sorted."""
    return sorted({name.lower() for text in sources for name in SCRIPT_COMMAND.findall(text)}
                  - NOT_COMMANDS)


def missing_named(names: Sequence[str], reply: Optional[Sequence[int]]) -> Optional[List[str]]:
    """The check's reply (positions in ``names``, the commands asked, from 1) as the
    commands the user lacks; None: Redis could not say."""
    if reply is None:
        return None
    return [names[int(position) - 1] for position in reply]


def asked_args(asked: Dict[str, Tuple[str, ...]], key: str) -> List[Any]:
    """EVALSHA's arguments after the sha: the key, then each command of ``asked`` as
    the count of its words and the words (a subcommand its own word)."""
    args: List[Any] = [1, key]
    for name, words in asked.items():
        command = [*name.split("|"), *words]
        args += [len(command), *command]
    return args


def missing_of(client: Any, asked: Dict[str, Tuple[str, ...]],
               key: str) -> Optional[List[str]]:
    """Which commands of ``asked`` (with their words) the user may not run; None:
    Redis cannot be asked. The check runs as the transport's scripts do (redis-py's
    script object: loaded again on NOSCRIPT)."""
    args = asked_args(asked, key)
    reply = Script(client, CHECK_SOURCE.encode())(keys=args[1:2], args=args[2:])
    return missing_named(list(asked), reply)


async def amissing_of(client: Any, asked: Dict[str, Tuple[str, ...]],
                      key: str) -> Optional[List[str]]:
    """``missing_of`` on an asyncio client."""
    args = asked_args(asked, key)
    reply = await AsyncScript(client, CHECK_SOURCE.encode())(keys=args[1:2], args=args[2:])
    return missing_named(list(asked), reply)


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


def sender_commands(sources: Dict[str, str]) -> Dict[str, Tuple[str, ...]]:
    """Every command of the ``CHECKED`` scripts among ``sources`` (each script's text as
    it runs, by name) but the ``OPTIONAL``, with the arguments it is asked with."""
    commands = commands_of(text for name, text in sources.items() if name in CHECKED)
    return {name: with_the_key(name) for name in commands if name not in OPTIONAL}


def check_nodes(owner: Any, keys: Iterable[str],
                ask: Callable[[str], Optional[List[str]]],
                refuse: Callable[[Sequence[str], str, str], Exception],
                errors: Callable[[str, str], ContextManager[Any]]) -> bool:
    """The check each caller makes (a send's, a worker's at its start, an ops
    command's): for the first of ``keys`` on each node (``one_key_per_node``),
    ``ask(key)`` which commands the ACL user lacks there, within ``errors(key, node)``
    (Redis's own errors worded by the caller); raise ``refuse(missing, key, node)`` at
    the first node that lacks any. Whether Redis could be asked (False: before 7.0)."""
    for key in one_key_per_node(owner, keys):
        node = node_of(owner, key)
        with errors(key, node):
            missing = ask(key)
        if missing is None:
            return False
        if missing:
            raise refuse(missing, key, node)
    return True


def require_commands(transport: Any, keys: Sequence[str], what: str) -> None:
    """Ask Redis (``transport``'s, blocking) on the node of each of ``keys`` which commands
    of the sending scripts the user lacks; raise ``refused_before_writing`` naming them,
    if any. Redis's own errors as ``transport.errors(what)`` words them."""
    asked = sender_commands(transport.sources)
    check_nodes(transport, keys,
                lambda key: missing_of(transport.client, asked, key),
                lambda missing, key, _: refused_before_writing(missing, key, what,
                                                               transport.description),
                lambda *_: transport.errors(what))


async def arequire_commands(store: Any, keys: Sequence[str], what: str) -> None:
    """``require_commands`` of an asyncio store (stores/aio.py)."""
    asked = sender_commands(store.broker.transport.sources)
    for key in one_key_per_node(store, keys):
        with store.errors(what):
            missing = await amissing_of(store.client, asked, key)
        if missing is None:
            return
        if missing:
            raise refused_before_writing(missing, key, what, store.description)


class SenderChecks:
    """Where a client's check passed: its server, or on Redis Cluster each primary node
    asked (``host:port``), whose ACL is its own and not copied to the others, so a node
    is asked before the first send that goes to it. A refusal part way (the ACL changed)
    forgets them all and bumps ``generation``: a check that passed meanwhile, in another
    thread, counts for nothing."""

    def __init__(self, cluster: bool) -> None:
        self.cluster = cluster
        self.nodes: Set[str] = set()
        #: The hash slots of the keys whose check passed: a send to one of them asks
        #: nothing more (not even its node), until a refusal part way
        self.slots: Set[int] = set()
        self.generation = 0
        self.lock = threading.Lock()


def node_of(owner: Any, key: str) -> str:
    """The node (``host:port``) the check for ``key`` goes to: "" but on Redis Cluster
    (``owner``: a transport, or an asyncio store)."""
    if not owner.acl_checks.cluster:
        return ""
    return str(owner.client.get_node_from_key(key).name)


def _unseen_keys(owner: Any, calls: Sequence[Any]) -> List[str]:
    """The first keys of ``calls``' sending scripts in a hash slot not checked yet (on
    Redis Cluster, until every primary passed: a queue's sends to one node only)."""
    slots = owner.acl_checks.slots
    return [key for key in sending_keys(calls) if key_slot(key.encode()) not in slots]


def _unchecked_nodes(owner: Any, keys: Sequence[str]) -> List[str]:
    """Of ``keys``, those whose node was not checked yet."""
    nodes = owner.acl_checks.nodes
    return [key for key in keys if node_of(owner, key) not in nodes]


def check_sender(transport: Any, calls: Sequence[Any], what: str) -> None:
    """Before a transport's first call of a script that sends tasks (on Redis Cluster:
    the first to each node), every node ``calls`` send to checked before any is run."""
    generation = transport.acl_checks.generation
    keys = _unseen_keys(transport, calls)
    if keys:
        unchecked = _unchecked_nodes(transport, keys)
        if unchecked:
            require_commands(transport, unchecked, what)
        _passed(transport, generation, keys)


async def acheck_sender(store: Any, calls: Sequence[Any], what: str) -> None:
    """``check_sender`` of an asyncio store (stores/aio.py: ``acl_checks`` its own)."""
    generation = store.acl_checks.generation
    keys = _unseen_keys(store, calls)
    if not keys:
        return
    with store.errors(what):
        if store.acl_checks.cluster:
            await store.client.initialize()  # its slots read (a no-op once done)
        unchecked = _unchecked_nodes(store, keys)
    if unchecked:
        await arequire_commands(store, unchecked, what)
    _passed(store, generation, keys)


def _passed(owner: Any, generation: int, keys: Sequence[str]) -> None:
    """Note the check of the nodes (and hash slots) of ``keys`` passed, unless a
    refusal part way came since it began (``generation``: the ACL changed, ask again
    next time). Once every primary node passed (one node but on Redis Cluster), a send
    asks nothing more: the hot path pays one attribute read (a refusal part way,
    ``check_again``, asks again); until then, a send to a slot that passed pays a set
    lookup."""
    checks: SenderChecks = owner.acl_checks
    nodes = {node_of(owner, key) for key in keys}
    with checks.lock:
        if checks.generation != generation:
            return
        checks.nodes |= nodes
        checks.slots.update(key_slot(key.encode()) for key in keys)
        owner.acl_unchecked = checks.cluster and not all(
            primary.name in checks.nodes for primary in owner.client.get_primaries())


def watch_layout(owner: Any) -> None:
    """On Redis Cluster (``owner``: a transport, or an asyncio store): each time its
    client reads the cluster's layout again or follows a MOVED, the next send looks up
    its nodes again (``layout_changed``). Before, a node made primary after every
    primary had passed was never asked. redis-py 8 says it (AfterSlotsCacheRefreshEvent,
    to a listener of the client's own); before, ``NodesManager.initialize`` and
    ``move_slot`` are wrapped."""
    manager = getattr(owner.client, "nodes_manager", None)
    dispatcher: Any = getattr(manager, "_event_dispatcher", None)
    asynchronous = inspect.iscoroutinefunction(getattr(manager, "initialize", None))
    event = getattr(redis_events, ("Async" if asynchronous else "")
                    + "AfterSlotsCacheRefreshEvent", None)
    if event is not None and hasattr(dispatcher, "register_listeners"):
        listener = _AsyncLayout(owner) if asynchronous else _Layout(owner)
        dispatcher.register_listeners({event: [listener]})
        return
    for name in ("initialize", "move_slot"):
        original = getattr(manager, name, None)
        if original is None:
            continue
        if inspect.iscoroutinefunction(original):
            async def changed_async(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                try:
                    return await _original(*args, **kwargs)
                finally:
                    layout_changed(owner)
            wrapped: Any = functools.wraps(original)(changed_async)
        else:
            def changed(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                try:
                    return _original(*args, **kwargs)
                finally:
                    layout_changed(owner)
            wrapped = functools.wraps(original)(changed)
        try:
            setattr(manager, name, wrapped)
        except (AttributeError, TypeError):  # (__slots__: nothing to watch it by)
            return


class _Layout:
    """redis-py's listener of a client's layout read again (``watch_layout``)."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner

    def listen(self, event: object) -> None:
        layout_changed(self.owner)


class _AsyncLayout(_Layout):
    async def listen(self, event: object) -> None:  # type: ignore[override]
        layout_changed(self.owner)


def layout_changed(owner: Any) -> None:
    """The cluster's layout as the client knows it changed: the hash slots that passed
    are forgotten (a slot may be served by another node now) and the next send looks
    up the node of each of its keys; the nodes that passed stay passed (by their
    identity, ``host:port``), and one not asked yet is asked before a send to it."""
    checks: SenderChecks = owner.acl_checks
    with checks.lock:
        checks.slots.clear()
        owner.acl_unchecked = True


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
        checks.slots.clear()
        owner.acl_unchecked = True


# -- a worker's check, at its start ------------------------------------------------

#: Commands a worker sends itself (outside its scripts) and cannot go without, each
#: with the arguments it is asked with (as many as Redis takes, or more where it takes
#: any number): '' where the key goes. Not the key as each argument here: EVALSHA and
#: XREAD find their keys by a count or a keyword.
WORKER_DIRECT: Dict[str, Tuple[str, ...]] = {
    "evalsha": ("0" * 40, "1", ""), "script|load": ("return 1",), "ping": (),
    "blpop": ("", "1"), "blmove": ("", "", "RIGHT", "LEFT", "1"),
    "xread": ("STREAMS", "", "0"), "sadd": ("", ""), "getrange": ("", "0", "1"),
    "hgetall": ("",), "hincrbyfloat": ("", "f", "1"), "pexpireat": ("", "1")}

#: Commands the docs let a worker go without (guide/scaling: it runs, slower or with a
#: warning less), not asked about; XINFO and MEMORY are its scripts' XINFO STREAM and
#: MEMORY USAGE (called by pcall, their refusal tolerated).
WORKER_OPTIONAL = OPTIONAL | frozenset({
    "client|id", "client|unblock", "config|get", "info", "memory|usage", "xinfo|stream",
    "multi", "exec", "memory", "xinfo"})


def worker_commands(sources: Dict[str, str]) -> Dict[str, Tuple[str, ...]]:
    """Every command a worker cannot go without, with the arguments it is asked with:
    those of every script of ``sources`` (a worker sends tasks too, and runs them all
    but the ops CLI's; the key as each argument), and ``WORKER_DIRECT``."""
    asked = {name: with_the_key(name) for name in commands_of(sources.values())
             if name not in WORKER_OPTIONAL}
    asked.update(WORKER_DIRECT)
    return {name: words for name, words in sorted(asked.items())
            if name not in WORKER_OPTIONAL}


def missing_for_worker(client: Any, sources: Dict[str, str], key: str) -> Optional[List[str]]:
    """Which commands a worker needs the ACL user of ``client`` may not run (on
    ``key``'s node and key patterns); None: Redis cannot be asked (before 7.0)."""
    return missing_of(client, worker_commands(sources), key)


def one_key_per_node(owner: Any, keys: Iterable[str]) -> List[str]:
    """Of ``keys``, the first of each node (``node_of``: each primary on Redis Cluster,
    whose ACL is its own; the first key alone elsewhere), in order: where a check that
    covers them all asks."""
    chosen: Dict[str, str] = {}
    for key in keys:
        chosen.setdefault(node_of(owner, key), key)
    return list(chosen.values())


def missing_for_scripts(client: Any, sources: Dict[str, str], scripts: Iterable[str],
                        key: str) -> Optional[List[str]]:
    """``missing_for_worker`` for the commands of ``scripts`` alone (an ops command's)."""
    asked = {name: with_the_key(name)
             for name in commands_of(sources[script] for script in scripts)
             if name not in WORKER_OPTIONAL}
    return missing_of(client, asked, key)


def worker_refused(missing: Sequence[str], key: str, worker: str, broker: str,
                   node: str = "") -> str:
    """Why a worker whose ACL user lacks ``missing`` does not start, and what to add."""
    rules = " ".join(f"+{name}" for name in missing)
    where = f"on key {key!r}, node {node}" if node else f"on key {key!r}"
    return (f"worker {worker} cannot start: the Redis ACL user (broker {broker}) may not "
            f"run {', '.join(name.upper() for name in missing)} ({where}), which "
            f"the worker's scripts and commands call; Redis checks a script's commands "
            f"only as it comes to each, and one refused after a first write would leave a "
            f"task half done (acked but its result not stored, a workflow's step finished "
            f"but the next not sent), so the worker leased nothing; add {rules} (and keys "
            f"~minitask:*): a worker needs every command of the ACL list on the docs' "
            f"Scaling out page (guide/scaling)")


def ops_refused(missing: Sequence[str], key: str, what: str, broker: str,
                node: str = "") -> str:
    """Why an ops command (``minitask cancel``, ``purge``, ``dead requeue``...) whose
    ACL user lacks ``missing`` wrote nothing, and what to add."""
    rules = " ".join(f"+{name}" for name in missing)
    where = f"on key {key!r}, node {node}" if node else f"on key {key!r}"
    return (f"could not {what} (broker {broker}): the Redis ACL user may not run "
            f"{', '.join(name.upper() for name in missing)} ({where}), which its "
            f"scripts call; Redis checks a script's commands only as it comes to each, and "
            f"one refused after a first write would leave it half done, so nothing was "
            f"written; add {rules} (and keys ~minitask:*), as the ACL list on the docs' "
            f"Scaling out page (guide/scaling) says")
