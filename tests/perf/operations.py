"""The operations the instruction-count guard measures, each driven through minitask's
own producer API and stores, as a producer and a worker drive them.

Each ``Operation`` is prepared for a number of calls (not counted), warmed up by a few
calls (scripts loaded, Lua warm: not counted), then called ``CALLS`` times (counted);
the guard divides the Redis instructions of those calls by the tasks they handled.
Arguments and queue names are fixed, and every id has the same length, so two runs
send Redis the same commands with values of the same sizes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Tuple

from minitask import Minitask
from minitask.broker.keys import lane
from minitask.canvas import chain, chord, group
from minitask.stores.queue import Delivery, FetchTerms
from minitask.stores.results import Ack
from minitask.stores.workflow_reads import frame_of
from minitask.wire.message import Outcome, wall_ms

#: Counted calls per operation: enough that the markers' own cost and a dict resizing
#: now and then stay far under the guard's 5 %.
CALLS = 100
#: Calls made before the counted ones: scripts loaded, Lua warmed, keys made.
WARM_UP = 5
LEASE_MS = 300_000
MAX_DELIVERIES = 5
RESULT_TTL_MS = 86_400_000
#: The broadcast queue's subscribers.
SUBSCRIBERS = ("s0", "s1")
#: The queue whose acks write their entry in its record of recent outcomes, as a
#: worker's do in the default configuration (``recent_outcomes``, 2,000).
RECORDED = "recorded"


def plain(index: int) -> int:
    """A task whose result is kept."""
    return index


def total(values: List[int]) -> int:
    """A chord's body."""
    return sum(values)


def tenant_job(tenant: str, index: int) -> int:
    """A grouped task (fair queues): its calls grouped by ``tenant``."""
    return index


#: The guard's tasks: (name, function, options). Each queue is its own.
TASKS = (("plain", plain, {"queue": "plain"}),
         # flow limits never reached: a rate paced alone (500 or more a window), and
         # max_running. (A rate under 500 a window, kept as a log of starts, spaces its
         # starts in time: how many of the counted fetches find one due would depend on
         # the machine's speed, so it is not measured.)
         ("capped", plain, {"queue": "capped", "rate_limit": "1000000/s",
                            "max_running": 100000}),
         ("recorded", plain, {"queue": RECORDED}),
         ("step", plain, {"queue": "flows"}),  # a chord's member, a chain's step
         ("fanout", plain, {"queue": "fanout", "broadcast": True}),
         ("total", total, {"queue": "flows"}),
         # fair queues: each queue its own, so that one's groups never meet the other's
         ("tenants", tenant_job, {"queue": "tenants", "group_by": "tenant"}),
         ("tenant", tenant_job, {"queue": "tenant", "group_by": "tenant"}),
         ("turns", tenant_job, {"queue": "turns", "group_by": "tenant"}),
         ("pairs", tenant_job, {"queue": "pairs", "group_by": "tenant"}),
         ("backlog", tenant_job, {"queue": "backlog", "group_by": "tenant"}))

#: Tasks a grouped fetch takes a call: a worker's default prefetch.
GROUP_FETCH = 10


class Driver:
    """The producer app's broker, and the leases the acks to come end."""

    def __init__(self, url: str) -> None:
        self.app = Minitask("perfguard", broker=url)
        self.tasks = {name: self.app.task(name=name, **options)(function)
                      for name, function, options in TASKS}
        self.broker = self.app.broker
        self.leased: List[Tuple[str, Delivery]] = []
        self.sent = 0  # grouped sends so far: each names a new group
        self.paired = 0  # solo groups joined so far (their second task sent)
        #: Ids handed out by the calls that name theirs, so far.
        self.named = 0

    def fetch(self, queue: str, count: int) -> List[Delivery]:
        found = self.broker.queues.fetch(queue, now_ms=wall_ms(), lease_ms=LEASE_MS,
                                         count=count, max_deliveries=MAX_DELIVERIES)
        if len(found.deliveries) != count:
            raise RuntimeError(f"queue {queue!r} had {len(found.deliveries)} tasks ready, "
                               f"not {count}")
        return found.deliveries

    def lease(self, queue: str, count: int) -> None:
        """Lease ``count`` tasks of ``queue`` for the calls to come."""
        self.leased = []
        while len(self.leased) < count:
            got = self.fetch(queue, min(1000, count - len(self.leased)))
            self.leased += [(queue, delivery) for delivery in got]

    def take(self, count: int) -> List[Tuple[str, Delivery]]:
        taken, self.leased = self.leased[:count], self.leased[count:]
        return taken

    def ack(self, queue: str, delivery: Delivery, ttl_ms: int) -> Ack:
        """The task's ack; with its entry in the record of recent outcomes on the
        RECORDED queue only (of one size: a fixed name, worker and duration)."""
        now_ms = wall_ms()
        outcome = Outcome("succeeded", now_ms, value=7, attempt=1)
        results = self.broker.results
        entry = (results.entry(delivery.task_id, "perf", "succeeded", now_ms, 1, 0.001,
                               "perf-worker") if queue == RECORDED else b"")
        return results.prepare_ack(queue, delivery.task_id, outcome, ttl_ms, task_name="perf",
                                   flow=delivery.flow, slots=delivery.slots, entry=entry)


#: Given the driver and a number of calls: prepares for them, or makes them.
Step = Callable[[Driver, int], None]


@dataclass(frozen=True)
class Operation:
    """One measured operation: what it is, its preparation and its calls."""

    name: str
    what: str
    prepare: Step
    call: Step
    #: Tasks one call handles: the count is per task.
    per_call: int = 1


def _nothing(driver: Driver, calls: int) -> None:
    """No preparation."""


def _repeated(step: Step, times: int) -> Step:
    """``step`` made ``times`` times a call."""
    def call(driver: Driver, calls: int) -> None:
        step(driver, calls * times)
    return call


def _sending(name: str, **options: Any) -> Step:
    """``calls`` calls of task ``name``, each one message (with ``options``)."""
    def call(driver: Driver, calls: int) -> None:
        task = driver.tasks[name]
        for index in range(calls):
            task.apply_async((index,), **options)
    return call


def _naming(name: str) -> Step:
    """``calls`` calls of task ``name``, each naming its id (ids of one length)."""
    def call(driver: Driver, calls: int) -> None:
        task = driver.tasks[name]
        for index in range(calls):
            task.apply_async((index,), task_id=f"named-{driver.named:08d}")
            driver.named += 1
    return call


def _filled(name: str, per_call: int, lease: bool = False) -> Step:
    """Enqueue the tasks the calls need; lease them too, for acks."""
    def prepare(driver: Driver, calls: int) -> None:
        task = driver.tasks[name]
        task.delay_many([(i,) for i in range(calls * per_call)])
        if lease:
            driver.lease(task.queue, calls * per_call)
    return prepare


def _many(name: str, per_call: int) -> Step:
    def call(driver: Driver, calls: int) -> None:
        for _ in range(calls):
            driver.tasks[name].delay_many([(i,) for i in range(per_call)])
    return call


def _fetching(name: str, per_call: int) -> Step:
    def call(driver: Driver, calls: int) -> None:
        for _ in range(calls):
            driver.fetch(driver.tasks[name].queue, per_call)
    return call


def _acking(ttl_ms: int, per_call: int) -> Step:
    def call(driver: Driver, calls: int) -> None:
        for _ in range(calls):
            driver.broker.results.ack_many([driver.ack(queue, delivery, ttl_ms)
                                            for queue, delivery in driver.take(per_call)])
    return call


def _ack_fetch_prepare(driver: Driver, calls: int) -> None:
    driver.tasks["plain"].delay_many([(i,) for i in range(calls + 1)])
    driver.lease("plain", 1)


def _ack_fetch(driver: Driver, calls: int) -> None:
    """A process-pool child's drain loop at prefetch 1: the held task's outcome and the
    next fetch in one call (``ResultStore.ack_then``: ack_fetch.lua)."""
    queues, results = driver.broker.queues, driver.broker.results
    for _ in range(calls):
        queue, delivery = driver.leased[0]
        held, reply = results.ack_then(
            [driver.ack(queue, delivery, RESULT_TTL_MS)],
            queues.fetch_call(queue, wall_ms(), FetchTerms(LEASE_MS, 1, MAX_DELIVERIES)))
        fetched = queues.fetch_result(reply).deliveries
        if not held[0] or len(fetched) != 1:
            raise RuntimeError("ack_fetch found its lease lost, or fetched nothing")
        driver.leased = [(queue, fetched[0])]


def _recorded_prepare(driver: Driver, calls: int) -> None:
    """The RECORDED queue's record filled past its cap first (acks of 100 tasks a
    call), so that each counted ack's XADD trims it as a worker's does for good; then
    ack_fetch's tasks, the first leased."""
    task, full = driver.tasks["recorded"], driver.app.recent_outcomes + 200
    for start in range(0, full + calls + 1, 200):  # a few hundred a call: see _drain_prepare
        task.delay_many([(i,) for i in range(start, min(full + calls + 1, start + 200))])
    driver.lease(RECORDED, full)
    _acking(RESULT_TTL_MS, 100)(driver, full // 100)
    driver.lease(RECORDED, 1)


def _drain_prepare(name: str, grouped: bool, prefetch: int = GROUP_FETCH) -> Step:
    """The tasks a worker's drain calls take at ``prefetch`` (grouped: each its own
    group), the first ``prefetch`` leased."""
    def prepare(driver: Driver, calls: int) -> None:
        task = driver.tasks[name]
        count = (calls + 1) * prefetch
        # a few hundred a call: one script call of a thousand grouped sends can outlast
        # the client's timeout under valgrind on a busy machine
        for start in range(0, count, 200):
            task.delay_many([(f"t{i:06d}", i) if grouped else (i,)
                             for i in range(start, min(count, start + 200))])
        driver.lease(task.queue, prefetch)
    return prepare


def _draining(driver: Driver, calls: int) -> None:
    """A worker's drain loop at prefetch ``GROUP_FETCH``: the held tasks' outcomes
    and the next fetch in one call (ack_fetch.lua)."""
    queues, results = driver.broker.queues, driver.broker.results
    for _ in range(calls):
        queue = driver.leased[0][0]
        held, reply = results.ack_then(
            [driver.ack(queue, delivery, RESULT_TTL_MS) for _, delivery in driver.leased],
            queues.fetch_call(queue, wall_ms(),
                              FetchTerms(LEASE_MS, GROUP_FETCH, MAX_DELIVERIES)))
        fetched = queues.fetch_result(reply).deliveries
        if not all(held) or len(fetched) != GROUP_FETCH:
            raise RuntimeError("a drain call found a lease lost, or fetched too few")
        driver.leased = [(queue, delivery) for delivery in fetched]


def _tenants(name: str, per_call: int, one: bool, groups: int = 0) -> Step:
    """Grouped tasks of task ``name`` for the calls: each its own group (a tenant
    with one task: each served empties its group), all of one group, or (``groups``)
    in turn in that many groups, each with a backlog."""
    def prepare(driver: Driver, calls: int) -> None:
        count = calls * per_call
        for start in range(0, count, 200):  # a few hundred a call: see _drain_prepare
            driver.tasks[name].delay_many([
                ("one" if one else f"t{i % groups:06d}" if groups else f"t{i:06d}", i)
                for i in range(start, min(count, start + 200))])
    return prepare


def _drain_one_group_prepare(driver: Driver, calls: int) -> None:
    """The tasks of one group a worker's drain calls take at ``GROUP_FETCH``, the first
    ``GROUP_FETCH`` leased."""
    task = driver.tasks["backlog"]
    count = (calls + 1) * GROUP_FETCH
    for start in range(0, count, 200):
        task.delay_many([("one", i) for i in range(start, min(count, start + 200))])
    driver.lease(task.queue, GROUP_FETCH)


def _sending_grouped(driver: Driver, calls: int) -> None:
    """``calls`` delay() calls of a grouped task, each of a group new to the queue."""
    task = driver.tasks["tenants"]
    for _ in range(calls):
        driver.sent += 1
        task.delay(f"t{driver.sent:06d}", driver.sent)


def _solo_groups(driver: Driver, calls: int) -> None:
    """A group of one task (a solo group: its claim in groups_solo, its token holding
    the task in a ready list) for each call to come."""
    task = driver.tasks["pairs"]
    for start in range(0, calls, 200):  # a few hundred a call: see _drain_prepare
        task.delay_many([(f"p{i:06d}", i) for i in range(start, min(calls, start + 200))])
    driver.paired = 0


def _joining_solo_groups(driver: Driver, calls: int) -> None:
    """``calls`` delay() calls of a grouped task, each the second task of a solo group
    (groups of two): its claim lifted into the group's ready set (flow.lua's lift())."""
    task = driver.tasks["pairs"]
    for _ in range(calls):
        task.delay(f"p{driver.paired:06d}", -1)
        driver.paired += 1


def _sending_to_one_group(driver: Driver, calls: int) -> None:
    """``calls`` delay() calls of a grouped task, all of one group (in the rotation
    from the warm-up's first call on)."""
    task = driver.tasks["tenant"]
    for index in range(calls):
        task.delay("one", index)


def _chords(driver: Driver, calls: int) -> None:
    """One chord of ``calls`` members, whose first tasks are leased; and spawn.lua
    loaded, which the last member's sending of the body runs (the chord's own sending
    is spawn_group.lua's): a script's first use is its loading, not counted."""
    step, total = driver.tasks["step"], driver.tasks["total"]
    chord(group(step.s(i) for i in range(calls)), total.s()).delay()
    driver.lease(step.queue, calls)
    chain(step.s(-1), step.s()).delay()  # left queued, never leased


def _chains(driver: Driver, calls: int) -> None:
    """``calls`` chains of two steps, whose first steps are leased."""
    step = driver.tasks["step"]
    for index in range(calls):
        chain(step.s(index), step.s()).delay()
    driver.lease(step.queue, calls)


def _subscribed(driver: Driver, calls: int) -> None:
    """Two subscribers of the broadcast queue (a send passes both)."""
    for name in SUBSCRIBERS:
        driver.broker.broadcasts.subscribe("fanout", name, wall_ms())


def _subscribed_and_sent(driver: Driver, calls: int) -> None:
    """Subscribed, the calls sent, and the pull script loaded: a script's first use in a
    write of several calls runs it after the others (redis-py's NOSCRIPT path), so the
    first pull's call would be fetched one round late."""
    _subscribed(driver, calls)
    driver.tasks["fanout"].delay_many([(i,) for i in range(calls)])
    driver.broker.transport.run_calls(
        [driver.broker.broadcasts.pull_call("fanout", SUBSCRIBERS[0], 0, wall_ms())],
        "load the pull script")


def _pulling(driver: Driver, calls: int) -> None:
    """A subscriber's worker taking one broadcast call: a pull into its lane, the lane's
    fetch and the pull that re-arms its wake, in one round trip (as the worker sends)."""
    store, queues = driver.broker.broadcasts, driver.broker.queues
    own = lane("fanout", SUBSCRIBERS[0])
    for _ in range(calls):
        now_ms = wall_ms()
        _, fetched, _ = driver.broker.transport.run_calls(
            [store.pull_call("fanout", SUBSCRIBERS[0], 1, now_ms),
             queues.fetch_call(own, now_ms, FetchTerms(LEASE_MS, 1, MAX_DELIVERIES)),
             store.pull_call("fanout", SUBSCRIBERS[0], 0, now_ms)], "pull a broadcast call")
        if len(queues.fetch_result(fetched).deliveries) != 1:
            raise RuntimeError("a broadcast pull leased no call")


def _advancing(driver: Driver, calls: int) -> None:
    """What a worker does after a workflow's step succeeded: carry the workflow on."""
    store = driver.broker.workflows
    for _, delivery in driver.take(calls):
        message = delivery.message()
        frame = frame_of(message)
        assert frame is not None
        store.advance(frame, message.args[0], wall_ms())


def operations() -> List[Operation]:
    """Every measured operation, in the table's order."""
    return [
        # ten a call: a plain delay() costs Redis so little that where its random id
        # lands in the messages hash moved a count of 100 by up to 4 %
        Operation("delay", "delay(): a task ready at once (three plain commands, no script: "
                           "QueueStore.push)", _nothing, _repeated(_sending("plain"), 10), 10),
        Operation("delay_task_id", "apply_async(task_id=...): a task ready at once, its id "
                                   "given (enqueue_now.lua)", _nothing, _naming("plain")),
        Operation("delay_later", "apply_async(delay=3600): a delayed task (enqueue.lua)",
                  _nothing, _sending("plain", delay=3600)),
        Operation("delay_many", "delay_many() of 100 calls, per task (enqueue.lua)",
                  _nothing, _many("plain", 100), 100),
        Operation("fetch", "a fetch of one task (fetch.lua)",
                  _filled("plain", 1), _fetching("plain", 1)),
        Operation("fetch_100", "a fetch of 100 tasks, per task (fetch.lua)",
                  _filled("plain", 100), _fetching("plain", 100), 100),
        Operation("fetch_10", f"a fetch of {GROUP_FETCH} tasks (a worker's prefetch), per "
                              "task (fetch.lua): fetch_group's and fetch_groups' baseline",
                  _filled("plain", GROUP_FETCH), _fetching("plain", GROUP_FETCH), GROUP_FETCH),
        Operation("ack", "an ack keeping the result (ack.lua)",
                  _filled("plain", 1, True), _acking(RESULT_TTL_MS, 1)),
        Operation("ack_ignore_result", "an ack keeping no result (ack.lua)",
                  _filled("plain", 1, True), _acking(0, 1)),
        Operation("ack_100", "100 acks in one call, per task (ack.lua)",
                  _filled("plain", 100, True), _acking(RESULT_TTL_MS, 100), 100),
        Operation("ack_fetch", "a task drained at prefetch 1: its ack and the next fetch "
                               "(ack_fetch.lua): ack_fetch_groups' baseline", _ack_fetch_prepare,
                  _ack_fetch),
        Operation("ack_fetch_record", "ack_fetch with the task's entry in the record of "
                                      "recent outcomes at its cap (2,000): a process-pool "
                                      "child's drain at prefetch 1 in the default "
                                      "configuration (ack_fetch.lua's XADD)",
                  _recorded_prepare, _ack_fetch),
        Operation("drain_10", f"a worker's drain call at prefetch {GROUP_FETCH}: the acks of "
                              f"{GROUP_FETCH} tasks and the next fetch of {GROUP_FETCH}, per "
                              "task (ack_fetch.lua): drain_groups' baseline",
                  _drain_prepare("plain", False), _draining, GROUP_FETCH),
        Operation("delay_flow", "delay() of a task with rate_limit and max_running "
                                "(enqueue_flow.lua)", _nothing, _sending("capped")),
        Operation("fetch_flow", "a fetch under a paced rate_limit and max_running (fetch.lua)",
                  _filled("capped", 1), _fetching("capped", 1)),
        Operation("ack_flow", "an ack freeing a max_running slot (ack.lua)",
                  _filled("capped", 1, True), _acking(RESULT_TTL_MS, 1)),
        Operation("delay_group", "delay() of a grouped task, a new group each "
                                 "(enqueue_group.lua)", _nothing, _sending_grouped),
        Operation("delay_group_one", "delay() of a grouped task, all of one group "
                                     "(enqueue_group.lua)", _nothing, _sending_to_one_group),
        Operation("delay_group_join", "delay() of a grouped task joining a solo group, "
                                      "its second task (groups of two: enqueue_group.lua, "
                                      "flow.lua's lift() of the group's claim)",
                  _solo_groups, _joining_solo_groups),
        Operation("fetch_groups", f"a fetch of {GROUP_FETCH} grouped tasks, each its own "
                                  "group, per task (fetch.lua, flow.lua's fair queues)",
                  _tenants("tenants", GROUP_FETCH, False), _fetching("tenants", GROUP_FETCH),
                  GROUP_FETCH),
        Operation("fetch_group", f"a fetch of {GROUP_FETCH} tasks of one group, per task "
                                 "(fetch.lua, flow.lua's fair queues)",
                  _tenants("tenant", GROUP_FETCH, True), _fetching("tenant", GROUP_FETCH),
                  GROUP_FETCH),
        Operation("fetch_turns", f"a fetch of {GROUP_FETCH} tasks of {GROUP_FETCH} groups "
                                 "taking turns, each with a backlog, per task (fetch.lua, "
                                 "flow.lua's fair queues)",
                  _tenants("turns", GROUP_FETCH, False, GROUP_FETCH),
                  _fetching("turns", GROUP_FETCH), GROUP_FETCH),
        Operation("drain_group", "drain_10 of the tasks of one group, per task (ack_fetch.lua, "
                                 "flow.lua's fair queues)",
                  _drain_one_group_prepare, _draining, GROUP_FETCH),
        Operation("drain_groups", "drain_10 of grouped tasks, each its own group, per task "
                                  "(ack_fetch.lua, flow.lua's fair queues)",
                  _drain_prepare("tenants", True), _draining, GROUP_FETCH),
        Operation("ack_fetch_groups", "ack_fetch of grouped tasks, each its own group "
                                      "(ack_fetch.lua, flow.lua's fair queues): a process-pool "
                                      "child's drain at prefetch 1",
                  _drain_prepare("tenants", True, 1), _ack_fetch),
        Operation("chord_member", "a chord member's result joined; the last sends the body",
                  _chords, _advancing),
        Operation("chain_step", "a chain's step done: the next one sent", _chains, _advancing),
        Operation("broadcast_send", "delay() of a broadcast call to two subscribers "
                                    "(broadcast_send.lua)", _subscribed, _sending("fanout")),
        Operation("broadcast_pull", "a subscriber taking one call: pull, fetch, pull "
                                    "(broadcast_pull.lua, fetch.lua)",
                  _subscribed_and_sent, _pulling),
    ]
