"""Every Redis key name minitask uses; pure functions, no I/O.

All keys of one queue share the hash tag ``{app:queue}``, so each Lua
script and multi-key command touches a single Redis Cluster slot::

    minitask:{app:queue}:ready:<p>    LIST  ready ids of priority p (0..9), oldest first
    minitask:{app:queue}:delayed      ZSET  id -> due_ms * 10 + (9 - priority)
    minitask:{app:queue}:order        HASH  id -> sequence number, for each delayed id only
    minitask:{app:queue}:sequence     STRING  the last sequence number handed out
    minitask:{app:queue}:leases       ZSET  id -> lease_deadline_ms * 10 + (9 - priority)
    minitask:{app:queue}:messages     HASH  id -> encoded Message (queued, running or dead)
    minitask:{app:queue}:deliveries   HASH  id -> hand-overs not yet ended by an outcome
    minitask:{app:queue}:retrying     HASH  id -> encoded Outcome of the last failed attempt
    minitask:{app:queue}:dead         ZSET  id -> time dead-lettered (ms)
    minitask:{app:queue}:dead_info    HASH  id -> encoded Outcome saying why it died
    minitask:{app:queue}:dead_trimmed STRING  how many dead letters dead_letters_max and
                                            dead_letters_ttl deleted (bury.lua), in all
    minitask:{app:queue}:cancelled    ZSET  id -> priority, of cancelled ids still in a ready list
    minitask:{app:queue}:wake         LIST  tokens idle workers block on (BLPOP)
    minitask:{app:queue}:cancels      STREAM  requests to stop running tasks (XREAD)
    minitask:{app:queue}:cancels_aside  STREAM  a cancels stream set aside, which held an
                                            entry minitask did not write (kept to inspect)
    minitask:{app:queue}:recent       STREAM  the last outcomes (field ``e``: a packed entry;
                                            ``n``: the writer's ``recent_outcomes``), trimmed
                                            as written to it and one stream node more at most
    minitask:{app:queue}:result:<id>  LIST  one encoded Outcome, expires after result_ttl
    minitask:{app:queue}:progress:<id>  STRING  the last set_progress() of a running task,
                                            packed; expires after the task's result_ttl
    minitask:{app:queue}:schedules    HASH  schedule name -> record (periodic.Schedule.record)
    minitask:{app:queue}:ticks        ZSET  schedule name -> its next tick (ms), the one armed
    minitask:{app:queue}:schedule_names ZSET  the names of schedules, each of score 0 (listed
                                            by name, their records measured before read)
    minitask:{app:queue}:fired        HASH  at:<name> -> tick of its last run (ms),
                                            id:<name> -> that run's task id
    minitask:{app:queue}:schedules_removed ZSET  name -> when remove_schedule removed it
                                            (ms); the newest REMOVED_MOST kept, a save
                                            of the name drops it

Flow control (``limits.py``, ``stores/lua/flow.lua``), under the queue's tag::

    minitask:{app:queue}:flow         HASH  id -> flow spec, for tasks with limits or an expiry
    minitask:{app:queue}:flow_due     ZSET  limiter -> when its parked tasks may be tried (ms)
    minitask:{app:queue}:flow_limiters SET  the limiters whose park list holds tasks (a
                                            fetch adds one as it parks its first task and
                                            drops it as it takes its last; purge empties them)
    minitask:{app:queue}:flow_parked  STRING  how many tasks the park lists hold (status
                                            reads it: no call per limiter)
    minitask:{app:queue}:flow_dead    HASH  id -> flow spec of a dead letter, so that
                                            requeue_dead puts it back with its limits
    minitask:{app:queue}:flow:<limiter>:park     LIST  parked ids (priority digit + id), in order
                                                       (or a group's token its task's limits hold)
    minitask:{app:queue}:flow:<limiter>:starts   ZSET  recent starts (ms) and the pace
    minitask:{app:queue}:flow:<limiter>:pace     STRING when the next start is due, for a
                                                        rate of 500 or more a window (no log)
    minitask:{app:queue}:flow:<limiter>:running  SET   ids holding a max_running slot

Fair queues (``docs/guide/fair-queues.rst``, ``stores/lua/flow.lua``), under the
queue's tag, also built from ``flow_prefix`` (a group's name never starts with a digit
there: ``g:`` comes first, so no group's keys meet a limiter's)::

    minitask:{app:queue}:flow:groups            ZSET  group -> ready tasks, each group
                                                      that has any (status reads it)
    minitask:{app:queue}:flow:groups_ready      STRING  the grouped ready tasks of the queue
                                                      in ready sets (gone at 0)
    minitask:{app:queue}:flow:groups_solo       HASH  group -> the claim of its one
                                                      task, for each solo group of a
                                                      plain task (no turn, no ready set,
                                                      no groups entry: its token in a
                                                      ready list counts it)
    minitask:{app:queue}:flow:groups_paused     SET   groups paused by an operator
    minitask:{app:queue}:flow:groups_weight     HASH  group -> weight, when not 1
    minitask:{app:queue}:flow:groups_weight_said  HASH  group -> when a weight that is
                                                      not minitask's was last said in
                                                      Redis's log (at most once a
                                                      minute), and the calls since;
                                                      gone an hour after
    minitask:{app:queue}:flow:g:<group>:ready   ZSET  its ready ids -> (9 - priority)
                                                      * 1e14 + order of joining
    minitask:{app:queue}:flow:g:<group>:turn    HASH  its live rotation token (tok,
                                                      band), fetches this turn (served)
                                                      and a counter (gen)
    minitask:{app:queue}:flow:g:<group>:running SET   ids holding a group_max_running slot
    minitask:{app:queue}:flow:g:<group>:starts  ZSET  its recent starts (group_rate_limit)
    minitask:{app:queue}:flow:g:<group>:pace    STRING its next start, for a rate of 500
                                                      or more a window
    minitask:{app:queue}:flow_due  'g:<group>'  when the group comes back into the rotation

The rotation itself is the queue's ready lists: a group with work has one token there
(the byte 0xff, a generation, 0xff, the group: never an id), and in ``cancelled`` (at
its priority) while it is there, so that counts leave it out as they leave out a
cancelled entry. A group with no ready task and no slot held leaves none of its keys
behind; the weights and pauses an operator set stay until reset (weight 1,
``resume_group``).

A limiter names one task (and limit key): ``<len(name)>:<name>[:<key>]``. Its keys
are built by the scripts from ``flow_prefix``, which is passed in KEYS (the same
slot), since which limiters a fetch meets is known only when it pops the ids.
This is the one exception to "every key a script touches is in KEYS" (STYLE): a
fetch learns which limiters it touches only by reading the flow specs of the ids
it pops, inside the same atomic step, so the caller cannot name them beforehand
(declaring them would take a read-then-script round trip that races with other
workers, or a per-limiter script call). Every such key starts with the queue's
``base`` and so shares its hash tag and slot: Redis Cluster routes the script by
its declared keys, and a key built from the prefix is always on the same node.
``tests/scale/test_flow_cluster.py`` runs limits on a real cluster as the proof.

Workflow state (chain, group, chord; ``stores/workflows.py``): a step's marker under
the tag of the queue the step is sent to, a group's state under the tag of the queue
of its first member's first task::

    minitask:{app:queue}:once:<id>    HASH    state: a workflow step <id> was "sent" or
                                              "cancelled" (never sent again); w: the id of
                                              its workflow; expires with its workflow's
                                              longest result (its handle record)
    minitask:{app:queue}:group:<gid>  HASH    a group awaited as a whole: size, what
                                              follows it, who failed it, fired flag
    minitask:{app:queue}:group:<gid>:results  HASH  member index -> packed result
    minitask:{app:queue}:handle:<id>  STRING  what app.handle / app.group_handle rebuild
                                              for a workflow sent with it (under the tag of
                                              its first task's queue): a chain's last step
                                              not sent yet, or a group's members; expires
                                              with the workflow's results
    minitask:{app:queue}:workflow:<id>  STRING  a workflow's plan (stores/plans.py), beside
                                              its handle record, written and expiring with it

Broadcast calls (``stores/broadcast.py``), under the tag of their queue::

    minitask:{app:queue}:bcast:state    HASH    seq: the last call sequence number handed
                                                out; dropped: the last sequence dropped
                                                unpulled (over broadcast_maxlen or _ttl);
                                                maxlen, ttl (ms): the last send's limits;
                                                prune_ttl (ms): the longest ttl a send
                                                gave (prunes go by it); scan: the HSCAN
                                                cursor while indexing an earlier
                                                layout's cursors; indexed: that scan
                                                came back to 0
    minitask:{app:queue}:bcast:log      ZSET    call id -> sequence, calls some subscriber
                                                has not pulled yet
    minitask:{app:queue}:bcast:bodies   HASH    call id -> encoded Message, for each call in log
    minitask:{app:queue}:bcast:sent     HASH    call id -> time sent (ms), for each call in log
    minitask:{app:queue}:bcast:joins    ZSET    call id -> sequence, the last maxlen calls
                                                (join() waits for who subscribed before)
    minitask:{app:queue}:bcast:names    HASH    call id -> subscribers at send time, joined
                                                by newlines: written by earlier versions
                                                only, read for their calls
    minitask:{app:queue}:bcast:cursors  HASH    subscriber -> sequence of the last call pulled
    minitask:{app:queue}:bcast:seen     HASH    subscriber -> when a worker of it was
                                                last alive (ms)
    minitask:{app:queue}:bcast:places   ZSET    subscriber -> its cursor (least: ZRANGE 0 0)
    minitask:{app:queue}:bcast:since    ZSET    subscriber -> the sequence it subscribed after
    minitask:{app:queue}:bcast:alive    ZSET    subscriber -> last seen (ms, the server's
                                                clock): pruned past prune_ttl and a
                                                minute, 16 a script

A subscriber's pulled calls run as tasks of its *lane*, a queue of its own under
the same tag: the queue string ``queue:subscriber`` (``lane``; queue names hold
no ``:``) has every key above of a queue, with ``lane:<subscriber>:`` after
the tag, e.g. ``minitask:{app:queue}:lane:<subscriber>:ready:9``.
A write confirmed by replicas (``durability.py``) touches one key in its slot, so
that WAIT covers what a script read but did not write::

    minitask:{tag}:confirmed          STRING  "1", rewritten by each confirmed write batch

App-wide keys (their own slot, never mixed with queue keys in one command)::

    minitask:{app}:queues             SET   every queue name the app has used
    minitask:{app}:workers            ZSET  worker name -> last heartbeat (ms)
    minitask:{app}:worker:<name>      HASH  a worker's description and counters
    minitask:{app}:control:<name>     LIST  orders to a worker (shutdown), read with BLPOP
    minitask:{app}:metrics            HASH  counter and histogram bucket -> total over all
                                            workers, added with their heartbeats
    minitask:{app}:throughput:<min>   HASH  queue -> attempts that ended in that minute
                                            (Unix minutes); expires after two hours

The packed scores keep priority next to the time so that promotion and
lease reclaim can put a task back at its priority without reading it.

A ready list may hold stale entries: a cancelled task (its message is gone)
or a second entry of a task already leased. Fetching skips both, so cancel
stays O(1) and no operation scans a queue. Cancelled ids stay in
``cancelled`` until fetch drops their entry, so counts can leave them out.

Delayed tasks due at the same millisecond would sort by id in the ZSET; the
sequence number in ``order`` (taken when a task is scheduled, dropped when it
is promoted) lets promotion move them in the order they were scheduled.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Dict

PREFIX = "minitask"

#: Priorities, in the order they are served.
PRIORITIES = tuple(range(9, -1, -1))

#: Characters that would break a hash tag or the ``:`` between key parts.
_FORBIDDEN = frozenset("{}: \t\r\n")
#: Characters that are wildcards in Redis patterns (ACL ``~pattern``, SCAN MATCH):
#: in an app name they would make a per-app pattern match other apps' keys.
_GLOB = frozenset("*?[]\\")
#: The longest name (of an app, a queue, a worker...) minitask accepts, in characters
#: (a worker's id, ``host.pid.xxxxxx``, fits with a 253-character host name): a longer
#: one read from a registry is no name minitask wrote, and is left out.
MAX_NAME = 300
#: Unicode categories refused in names: controls, format characters, line and
#: paragraph separators, lone surrogates. message.UNPRINTABLE is the same rule for
#: task names and ids (this module imports nothing, so it keeps its own copy).
_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def check_name(kind: str, name: str) -> str:
    """Refuse a name that would break a hash tag, forge a log line or, for an app,
    widen a key pattern; ``kind`` is ``"app"``, ``"queue"``...

    Raises:
        ValueError: the name is empty, longer than MAX_NAME or holds such a character
            (named in the message).
    """
    if not name:
        raise ValueError(f"{kind} name {name!r} must not be empty")
    if len(name) > MAX_NAME:
        raise ValueError(f"{kind} name {name[:40]!r}... is {len(name)} characters long; "
                         f"names are at most {MAX_NAME}")
    plain = name.isascii() and name.isprintable()  # the usual case: no lookups
    for char in name:
        if char in _FORBIDDEN or not plain and _is_unprintable_or_space(char):
            raise ValueError(
                f"{kind} name {name!r} holds {char!r} (U+{ord(char):04X}); names must be "
                f"free of '{{', '}}', ':', whitespace and control or format characters")
        if kind == "app" and char in _GLOB:
            raise ValueError(
                f"app name {name!r} holds {char!r}, a wildcard in Redis key patterns "
                f"(ACL rules); app names must be free of '*', '?', '[', ']' and '\\'")
    return name


def confirm_key(key: str) -> str:
    """The key a confirmed write touches: in the slot of ``key``, under its hash tag."""
    start = key.find("{")
    end = key.find("}", start + 1)
    tag = key[start + 1:end] if 0 <= start < end - 1 else key
    return f"{PREFIX}:{{{tag}}}:confirmed"


def _is_unprintable_or_space(char: str) -> bool:
    category = unicodedata.category(char)
    return category in _UNPRINTABLE or category.startswith("Z")


#: The keys of a queue named by a word alone: the field ``delayed`` is ``<base>delayed``.
_PLAIN = ("delayed", "order", "sequence", "cancelled", "leases", "lease_longest", "messages",
          "deliveries", "retrying", "dead", "dead_info", "dead_trimmed", "wake", "cancels",
          "cancels_aside", "recent", "flow", "flow_due", "flow_dead", "flow_limiters",
          "flow_parked", "schedules", "ticks", "fired", "schedule_names", "schedules_removed")


@dataclass(frozen=True)
class QueueKeys:
    """The keys of one queue of one app, every name built once (``queue_keys``)."""

    app: str
    queue: str
    #: The start of every key of the queue: ``minitask:{app:queue}:``.
    base: str = field(init=False)
    #: The ready lists, highest priority first (index 9 - priority).
    ready: tuple[str, ...] = field(init=False)
    delayed: str = field(init=False)
    order: str = field(init=False)
    sequence: str = field(init=False)
    cancelled: str = field(init=False)
    leases: str = field(init=False)
    #: The longest lease a worker of the queue takes (its visibility timeout), as the
    #: score of the member ``ms``: fetch.lua tells a lease no worker holds from it.
    lease_longest: str = field(init=False)
    messages: str = field(init=False)
    deliveries: str = field(init=False)
    retrying: str = field(init=False)
    dead: str = field(init=False)
    dead_info: str = field(init=False)
    #: How many dead letters the app's bounds deleted (oldest first), in all.
    dead_trimmed: str = field(init=False)
    wake: str = field(init=False)
    #: Requests to stop running tasks, read by every worker of the queue.
    cancels: str = field(init=False)
    #: A cancels stream set aside: it held an entry minitask did not write.
    cancels_aside: str = field(init=False)
    #: The last outcomes of the queue's tasks, newest last, capped (stores/recent.py).
    recent: str = field(init=False)
    flow: str = field(init=False)
    flow_due: str = field(init=False)
    flow_dead: str = field(init=False)
    flow_limiters: str = field(init=False)
    flow_parked: str = field(init=False)
    #: Not a key: the start of every limiter's keys (see the module docstring).
    flow_prefix: str = field(init=False)
    #: Fair queues: group -> ready tasks, for each group that has any.
    groups: str = field(init=False)
    #: Fair queues: how many grouped tasks are ready (status adds them to ready).
    groups_ready: str = field(init=False)
    #: Fair queues: group -> its one task's claim, for each solo group of a plain task.
    groups_solo: str = field(init=False)
    #: Fair queues: the paused groups.
    groups_paused: str = field(init=False)
    #: Fair queues: group -> weight, for each group whose weight is not 1.
    groups_weight: str = field(init=False)
    schedules: str = field(init=False)
    ticks: str = field(init=False)
    fired: str = field(init=False)
    #: The names of the queue's schedules (score 0): listings page it, never the records.
    schedule_names: str = field(init=False)
    #: Schedules removed by remove_schedule, by when (ms): running workers do not write
    #: them back (schedule_save.lua); the newest REMOVED_MOST are kept.
    schedules_removed: str = field(init=False)

    def __post_init__(self) -> None:
        queue, lane, subscriber = self.queue.partition(":")
        if lane:  # a subscriber's lane: under its queue's tag (see ``lane``)
            base = f"{PREFIX}:{{{self.app}:{queue}}}:lane:{subscriber}:"
        else:
            base = f"{PREFIX}:{{{self.app}:{self.queue}}}:"
        names: Dict[str, object] = {word: base + word for word in _PLAIN}
        names.update(base=base, flow_prefix=base + "flow:", groups=base + "flow:groups",
                     groups_ready=base + "flow:groups_ready",
                     groups_solo=base + "flow:groups_solo",
                     groups_paused=base + "flow:groups_paused",
                     groups_weight=base + "flow:groups_weight",
                     ready=tuple(f"{base}ready:{priority}" for priority in PRIORITIES))
        for name, key in names.items():
            object.__setattr__(self, name, key)  # frozen: set once, here

    def fair_group(self, group: str, part: str) -> str:
        """A key of one group of a fair queue: ``ready``, ``turn``, ``running``,
        ``starts`` or ``pace`` (the scripts build the same from ``flow_prefix``)."""
        return f"{self.flow_prefix}g:{group}:{part}"

    def broadcast(self, part: str) -> str:
        """A key of the queue's broadcast calls: ``state``, ``log``, ``bodies``, ``sent``,
        ``names``, ``joins``, ``cursors``, ``seen``, ``places``, ``since`` or ``alive``."""
        return self.base + "bcast:" + part

    def result(self, task_id: str) -> str:
        return self.base + "result:" + task_id

    def progress(self, task_id: str) -> str:
        return self.base + "progress:" + task_id

    def once(self, task_id: str) -> str:
        return self.base + "once:" + task_id

    def handle(self, some_id: str) -> str:
        return self.base + "handle:" + some_id

    def workflow(self, workflow_id: str) -> str:
        return self.base + "workflow:" + workflow_id

    def group(self, group_id: str) -> str:
        return self.base + "group:" + group_id

    def group_results(self, group_id: str) -> str:
        return self.base + "group:" + group_id + ":results"


@dataclass(frozen=True)
class AppKeys:
    """App-wide keys: the queue registry and the live workers."""

    app: str

    @cached_property
    def queues(self) -> str:
        return f"{PREFIX}:{{{self.app}}}:queues"

    @cached_property
    def lanes(self) -> str:
        """The broadcast lanes (``queue:subscriber``) workers have pulled into: apart
        from the queues, so that subscribers never grow the queue registry."""
        return f"{PREFIX}:{{{self.app}}}:lanes"

    @cached_property
    def workers(self) -> str:
        return f"{PREFIX}:{{{self.app}}}:workers"

    def worker(self, name: str) -> str:
        return f"{PREFIX}:{{{self.app}}}:worker:{name}"

    def control(self, name: str) -> str:
        return f"{PREFIX}:{{{self.app}}}:control:{name}"

    @cached_property
    def metrics(self) -> str:
        return f"{PREFIX}:{{{self.app}}}:metrics"

    def throughput(self, minute: int) -> str:
        return f"{PREFIX}:{{{self.app}}}:throughput:{minute}"


def app_patterns(app: str) -> tuple[str, str]:
    """The two key patterns (SCAN ``MATCH``, ACL ``~``) that together match every key of
    ``app``: its queues' keys (tag ``{app:queue}``) and its app-wide keys (tag ``{app}``).
    ``check_name`` keeps wildcards and ``:`` out of app names, so they match no other app's."""
    return f"{PREFIX}:{{{app}:*", f"{PREFIX}:{{{app}}}:*"


def lane(queue: str, subscriber: str) -> str:
    """The queue string of a subscriber's lane of ``queue``: its keys share the tag."""
    return f"{queue}:{subscriber}"


@lru_cache(maxsize=4096)
def queue_keys(app: str, queue: str) -> QueueKeys:
    """The keys of one queue, built once: every store of an app shares them."""
    return QueueKeys(app, queue)
