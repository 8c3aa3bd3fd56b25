"""Data in Redis that minitask did not write, planted BEFORE a worker starts and
before it restarts, never stops it (issue 29, section 1): the start-up paths read
every key the running worker's test (test_foreign_data_keeps_workers_running.py)
plants in, and more: declaring its queues, subscribing to broadcasts (and its
lanes), writing its schedules, reading the registries, its first heartbeats, and
taking back the leases a worker left behind.

The kinds of key are grouped by the start-up path that reads them first (PATHS);
for each path Hypothesis draws plants of some of its kinds twice: the first set
made in an empty Redis before a worker of tests.apps.foreign starts, the second
while it runs, before it is stopped (SIGTERM: it must exit 0; or SIGKILL while it
runs a task, whose lease the next worker must take back and run) and a new one
started. After each start a task of queue ``other`` must run (within a start-up
deadline, then within a second), the worker must be alive, its log free of
tracebacks (but a dead letter's) and of metrics it could not add, and the CLI and
the dashboard must answer as in the running worker's test. What was planted is
left as it was: a key of a type minitask does not keep there exactly, and the
entries planted in a schedules key, a registry, the dead letters or a progress
key all there (a start may add its own entries beside them).
"""
from __future__ import annotations

import os
import re
import signal
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
import redis
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from minitask import Minitask
from minitask.broker.keys import lane, queue_keys
from minitask.dashboard.web import Dashboard
from minitask.stores.names import MEMBER_BYTES
from tests.apps.foreign import build
from tests.integration.test_foreign_data_keeps_workers_running import (  # noqa: F401
    APP, NEWS, OTHER, PLANTS, REGISTRY, SCORES, SUBSCRIBER, TEXTS, TIMED, VALUES, WAITING,
    TYPES, answers, entry_points_read_once, fresh_field, plant_type, planted_keys, ran,
    this_minute, wrong_type)
from tests.support.processes import exit_code, kill_group
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

LANE = queue_keys("foreign", lane("news", SUBSCRIBER))
#: How long a worker may take to start and run its first task, on a loaded machine (s).
STARTUP = 60.0
#: The workers' visibility timeout (s): a killed worker's lease is taken back soon.
VISIBILITY = "3"


def stale_lease(client: "redis.Redis[bytes]", task_id: bytes, value: bytes) -> None:
    """A lease of queue ``other`` a dead worker left behind, long expired, of a task
    whose message and delivery count are ``value``: the next fetch takes it back."""
    task_id = task_id or b"t"
    client.zadd(OTHER.leases, {task_id: 10})
    client.hset(OTHER.messages, task_id, value)
    client.hset(OTHER.deliveries, task_id, value)


def due_with_fired(client: "redis.Redis[bytes]", field: bytes, value: bytes) -> None:
    """The schedule's tick due now, and its last run's ``field`` of ``fired`` (at: its
    tick, id: its task id) ``value``: the worker fires it on its first round."""
    if client.type(TIMED.fired) not in (b"hash", b"none"):
        client.delete(TIMED.fired)
    client.hset(TIMED.fired, field + b"hourly", value)
    if client.type(TIMED.ticks) not in (b"zset", b"none"):
        client.delete(TIMED.ticks)
    client.zadd(TIMED.ticks, {b"hourly": 1000})


def broadcast_call(client: "redis.Redis[bytes]", body: bytes, sent: bytes) -> None:
    """A call logged after the subscriber's cursor (sequence high above any other),
    whose body and time sent are ``body`` and ``sent``: its next pull takes it."""
    for part in ("state", "bodies", "sent"):
        if client.type(NEWS.broadcast(part)) not in (b"hash", b"none"):
            client.delete(NEWS.broadcast(part))
    if client.type(NEWS.broadcast("log")) not in (b"zset", b"none"):
        client.delete(NEWS.broadcast("log"))
    call = uuid.uuid4().hex.encode()
    client.hset(NEWS.broadcast("state"), "seq", 1_000_000)
    client.zadd(NEWS.broadcast("log"), {call: 1_000_000})
    client.hset(NEWS.broadcast("bodies"), call, body)
    client.hset(NEWS.broadcast("sent"), call, sent)


#: Counter fields of the metrics hash the worker adds to with its heartbeats.
COUNTERS = st.sampled_from([b"tasks\x1fother\x1fmark\x1fsucceeded", b"duration_sum\x1fmark",
                            b"pickup_sum\x1fother", b"duration\x1fmark\x1f+Inf",
                            b"pickup\x1fother\x1f0.005"])
#: Keys of the queue ``timed`` (the worker serves it; no task of ``other`` is there).
TIMED_OWN = [TIMED.ready[0], TIMED.ready[4], TIMED.leases, TIMED.delayed, TIMED.messages,
             TIMED.deliveries, TIMED.wake, TIMED.cancelled, TIMED.order, TIMED.sequence,
             TIMED.recent, TIMED.cancels]


def due(client: "redis.Redis[bytes]", name: bytes) -> None:
    """Schedule ``name``'s tick due now (in a ticks key of another type: none)."""
    if client.type(TIMED.ticks) in (b"zset", b"none"):
        client.zadd(TIMED.ticks, {name: 1000})


#: Keys of the subscriber's lane (a queue of its own) the worker serves.
LANE_OWN = [LANE.ready[0], LANE.messages, LANE.wake, LANE.leases, LANE.cancels,
            LANE.deliveries, LANE.delayed]


#: Keys the start-up paths read that the running worker's test does not plant in.
START_PLANTS: Dict[str, Any] = {
    # queue declaration (SADD) and the worker registry (ZADD, its first heartbeat)
    "queues key": wrong_type(REGISTRY.queues, "set"),
    "workers key": wrong_type(REGISTRY.workers, "zset"),
    # the lanes' registry (a lane is declared as its subscriber subscribes)
    "lanes key": st.one_of(
        wrong_type(REGISTRY.lanes, "set"),
        TEXTS.map(lambda name: lambda client: client.sadd(REGISTRY.lanes, name or b"\x00"))),
    # subscription: the broadcast state's sequence, and each key it writes or reads
    "broadcast state": st.one_of(
        wrong_type(NEWS.broadcast("state"), "hash"),
        VALUES.map(lambda value: lambda client: fresh_field(client, NEWS.broadcast("state"),
                                                            b"seq", value))),
    "broadcast log": st.one_of(
        wrong_type(NEWS.broadcast("log"), "zset"),
        st.tuples(TEXTS, SCORES).map(lambda planted: lambda client: (
            client.delete(NEWS.broadcast("log")),
            client.zadd(NEWS.broadcast("log"), {planted[0] or b"c": planted[1]})))),
    "broadcast seen": st.one_of(
        wrong_type(NEWS.broadcast("seen"), "hash"),
        VALUES.map(lambda value: lambda client: fresh_field(client, NEWS.broadcast("seen"),
                                                            SUBSCRIBER.encode(), value))),
    "broadcast alive": wrong_type(NEWS.broadcast("alive"), "zset"),
    # (non-finite scores in places belong to another test: only its type here)
    "broadcast places": wrong_type(NEWS.broadcast("places"), "zset"),
    # the subscriber's lane: what a worker that died left in it
    "lane leases": st.tuples(TEXTS, SCORES).map(lambda planted: lambda client: client.zadd(
        LANE.leases, {planted[0] or b"l": planted[1]})),
    "lane ready": TEXTS.map(lambda entry: lambda client: client.rpush(LANE.ready[0], entry)),
    "lane key": st.tuples(st.sampled_from(LANE_OWN), TYPES, VALUES).map(
        lambda planted: lambda client: plant_type(client, *planted)),
    # a schedule no worker wrote, due as the worker starts: a name and a record that
    # are no schedule's
    "foreign schedule due": st.tuples(TEXTS, VALUES).map(lambda planted: lambda client: (
        client.hset(TIMED.schedules, planted[0] or b"f", planted[1]),
        due(client, planted[0] or b"f"))),
    # the last run of a schedule due as the worker starts recorded in a key of
    # another type (the run must not be enqueued and the fire then refused)
    "fired due": st.tuples(TYPES.filter(lambda kind: kind != "hash"), VALUES).map(
        lambda planted: lambda client: (plant_type(client, TIMED.fired, *planted),
                                        due(client, b"hourly"))),
    # a schedule due as the worker starts, whose last run was recorded by no worker
    "fired field": st.tuples(st.sampled_from([b"at:", b"id:"]), VALUES).map(
        lambda planted: lambda client: due_with_fired(client, *planted)),
    # a broadcast call the subscriber pulls as it starts, of a body or time no one sent
    "broadcast call": st.tuples(VALUES, VALUES).map(
        lambda planted: lambda client: broadcast_call(client, *planted)),
    "broadcast bodies": st.one_of(
        wrong_type(NEWS.broadcast("bodies"), "hash"), wrong_type(NEWS.broadcast("sent"), "hash")),
    # counters the heartbeats add to: no number, or one past what Redis adds to
    "metrics counter": st.tuples(COUNTERS, VALUES).map(
        lambda planted: lambda client: fresh_field(client, REGISTRY.metrics, *planted)),
    "throughput of other": VALUES.map(lambda value: lambda client: fresh_field(
        client, this_minute(), b"other", value)),
    # the outcomes of queue other, written as each of its tasks ends
    "recent": wrong_type(OTHER.recent, "stream"),
    # flow control of queue other, read by its every fetch
    "flow": st.one_of(
        st.tuples(TEXTS, SCORES).map(lambda planted: lambda client: client.zadd(
            OTHER.flow_due, {planted[0] or b"1:x": planted[1]})),
        VALUES.map(lambda value: lambda client: client.set(OTHER.flow_parked, value)),
        wrong_type(OTHER.flow_limiters, "set"), wrong_type(OTHER.flow_due, "zset")),
    # another queue's own keys of another type
    "queue key": st.tuples(st.sampled_from(TIMED_OWN), TYPES, VALUES).map(
        lambda planted: lambda client: plant_type(client, *planted)),
    # leases taken back: an expired lease of a task whose message is no message
    "stale lease": st.tuples(TEXTS, VALUES).map(lambda planted: lambda client: stale_lease(
        client, *planted)),
}

#: Every kind but ``orders``: that key is named by the id a worker draws as it
#: starts, so no plant can be there before it.
KINDS: Dict[str, Any] = {**{kind: plants for kind, plants in PLANTS.items()
                            if kind != "orders"}, **START_PLANTS}
#: The kinds of key by the start-up path that reads them first (the last: those its
#: first fetches and heartbeats, and the CLI and dashboard, read). Kinds of one path
#: are planted together, on top of one another: two starts a path, not one a kind.
PATHS: Dict[str, List[str]] = {
    "queue declaration": ["queue registry", "queues key", "lanes key"],
    "subscription": ["cursor", "cursors", "broadcast state", "broadcast log", "broadcast seen",
                     "since", "broadcast alive", "broadcast places", "broadcast call",
                     "broadcast bodies"],
    "schedule loading": ["tick", "ticks", "schedules", "schedule record", "fired",
                         "fired field", "fired due", "foreign schedule due"],
    "lanes and leases": ["lane leases", "lane ready", "lane key", "lease score", "stale lease",
                         "cancels", "queue key"],
    "registries and heartbeats": ["worker registry", "workers key", "clock skew", "metrics",
                                  "metrics counter", "throughput", "throughput of other"],
    "first fetches": ["progress", "dead score", "group ready", "group turn", "recent", "flow"],
}

#: The type minitask keeps in a key, by the last part of its name.
KEPT_TYPES = {
    "zset": {"ticks", "dead", "leases", "delayed", "cancelled", "log", "since", "alive",
             "places", "flow_due", "workers", "ready"},
    "hash": {"schedules", "fired", "messages", "deliveries", "order", "cursors", "seen",
             "state", "bodies", "sent", "metrics", "turn"},
    "set": {"queues", "lanes", "flow_limiters"},
    "stream": {"cancels", "recent"},
    "string": {"progress", "sequence", "flow_parked"},
}
#: Keys of the type minitask keeps whose planted entries stay as they were: every
#: other such key holds entries minitask takes or rewrites as it reads them (a tick
#: re-armed, a cursor moved, a lease taken back, a counter added to).
KEPT_ENTRIES = {TIMED.schedules, REGISTRY.queues, REGISTRY.lanes, OTHER.dead,
                OTHER.progress(WAITING)}


def kept_type(key: str) -> Optional[str]:
    """The type minitask keeps in ``key`` (a ready list, unlike a group's ready set, is
    named ``ready:<priority>``; a worker's record ``worker:<id>``); None for a key
    no plant makes of another type (a planted worker's record, which a prune may
    drop)."""
    parts = key.split(":")
    if parts[-2:-1] == ["ready"] or parts[-2:-1] == ["control"] or parts[-1] == "wake":
        return "list"
    if parts[-2:-1] == ["throughput"]:
        return "hash"
    last = parts[-1]
    return next((kind for kind, names in KEPT_TYPES.items() if last in names), None)


def contents(client: "redis.Redis[bytes]", key: str) -> Tuple[str, Any]:
    """A key's type and what it holds: a set of entries for a set, a hash or a sorted
    set (a start may add its own entries there), else its DUMP."""
    kind = client.type(key).decode()
    if kind == "hash":
        return kind, set(client.hgetall(key).items())
    if kind == "set":
        return kind, set(client.smembers(key))
    if kind == "zset":
        return kind, set(client.zrange(key, 0, -1, withscores=True))
    return kind, client.dump(key)


def everything(client: "redis.Redis[bytes]") -> Dict[str, Tuple[str, Any]]:
    """Every key of the app (a test's Redis holds only these), with its contents."""
    return {key.decode(): contents(client, key.decode())
            for key in client.scan_iter(match="minitask:*", count=1000)}


def kept(client: "redis.Redis[bytes]", planted: Dict[str, Tuple[str, Any]]) -> None:
    """What was planted is still there: a key of a type minitask does not keep there
    exactly as it was (where it was, or moved aside whole to ``<key>:foreign`` by an
    outcome that writes there, lib.lua); the planted entries of KEPT_ENTRIES all
    there."""
    for key, (was, held) in planted.items():
        if kept_type(key) is None:
            continue
        if was != kept_type(key):
            places = [key] + [f"{key}:foreign{n if n > 1 else ''}" for n in range(1, 4)]
            assert (was, held) in [contents(client, place) for place in places], \
                f"{key} (a {was}) was changed"
        elif key in KEPT_ENTRIES:
            now, holds = contents(client, key)
            assert now == was, f"{key} was a {was}, now a {now}"
            if isinstance(held, set):
                if key in (REGISTRY.queues, REGISTRY.lanes):  # a member longer than a
                    # name is removed by the first listing, unsent (names_page.lua)
                    held = {member for member in held if len(member) <= MEMBER_BYTES}
                assert held <= holds, f"{key} lost {sorted(held - holds)[:5]!r}"
            else:
                assert holds == held, f"{key} changed"


class Workers:
    """The worker under test, started and restarted as the phases go."""

    def __init__(self, processes: Any, url: str, logs: Path, pool: str) -> None:
        self.processes, self.url, self.logs, self.pool = processes, url, logs, pool
        self.current: Optional[Any] = None
        self.log: Optional[Path] = None
        self.started = 0

    def start(self, admin: "redis.Redis[bytes]", producer: Minitask) -> None:
        self.started += 1
        self.log = self.logs / f"worker-{self.pool}-{self.started}.log"
        self.current = self.processes.worker(
            APP, "-Q", "other,timed,news", "--pool", self.pool, "-c", "2", "--name",
            SUBSCRIBER, env={"MINITASK_BROKER_URL": self.url, "TEST_VISIBILITY": VISIBILITY},
            log=self.log)
        token = uuid.uuid4().hex
        producer.tasks["mark"].delay(token)
        assert ran(admin, token, time.monotonic() + STARTUP), \
            f"the worker ran no task of queue 'other': {self.text()[-3000:]}"
        self.check()

    def check(self) -> None:
        assert self.current is not None and self.current.poll() is None, self.text()[-3000:]
        assert not self.tracebacks(), self.tracebacks()[-1][-3000:]
        # a counter Redis cannot add to is the counter's alone (it made the worker
        # add all its counts again at each heartbeat: test_foreign_counter_never_recounts)
        assert "could not add this worker's metrics" not in self.text(), self.text()[-3000:]

    def tracebacks(self) -> List[str]:
        """The log records with a traceback, but for a task's outcome (a dead letter
        of an undecodable planted message carries its decoding error's)."""
        records = re.split(r"\n(?=\d{4}-\d\d-\d\d )", self.text())
        return [record for record in records if "Traceback" in record
                and " minitask.worker.outcomes: " not in record.split("\n", 1)[0]]

    def kill(self, admin: "redis.Redis[bytes]", producer: Minitask) -> str:
        """SIGKILL the worker while it runs a task of queue ``other``, whose lease it
        leaves behind; that task's token."""
        assert self.current is not None
        self.check()
        token = uuid.uuid4().hex
        producer.tasks["nap"].delay(token)
        wait_until(lambda: admin.exists(f"napped:{token}"), timeout=STARTUP,
                   message="the worker to start the task it is killed in")
        kill_group(self.current)
        self.current = None
        return token

    def stop(self) -> None:
        if self.current is None:
            return
        self.check()
        self.current.send_signal(signal.SIGTERM)
        code = exit_code(self.current)
        assert code == 0, f"exit code {code}: {self.text()[-3000:]}"
        assert not self.tracebacks(), self.tracebacks()[-1][-3000:]
        self.current = None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log else ""


@pytest.fixture
def producer(redis_server: Any, admin: "redis.Redis[bytes]",
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Minitask]:
    """The producer's app, with the hour-long task whose progress key gets plants."""
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app = build(redis_server.url)
    app.tasks["mark"].apply_async(("later",), task_id=WAITING, delay=3600)
    try:
        yield app
    finally:
        app.close()


Plant = Callable[["redis.Redis[bytes]"], Any]


def plant_all(plants: Sequence[Plant], admin: "redis.Redis[bytes]"
              ) -> Dict[str, Tuple[str, Any]]:
    """Plant each on top of the others (one's key may hold another type already: a
    wrong-type ``ticks`` refuses a ``tick``, which is then not planted); the keys the
    plants changed, each with its type and what was added (its entries, for a set,
    a hash or a sorted set of the type it had before)."""
    before = everything(admin)
    for plant in plants:
        try:
            plant(admin)
        except redis.ResponseError:
            pass
    changed = {}
    for key, (kind, held) in everything(admin).items():
        was = before.get(key, ("none", None))
        if (kind, held) != was:
            changed[key] = (kind, held - was[1] if isinstance(held, set) and was[0] == kind
                            else held)
    return changed


def kinds_of(path: str) -> Any:
    """A strategy of (kinds, plants): some of the path's kinds, a plant of each."""
    return st.lists(st.sampled_from(PATHS[path]), min_size=1, unique=True).flatmap(
        lambda kinds: st.tuples(st.just(sorted(kinds)),
                                st.tuples(*(KINDS[kind] for kind in sorted(kinds)))))


def check(workers: Workers, producer: Minitask, admin: "redis.Redis[bytes]",
          plants: Any, examples: int) -> None:
    """Hypothesis draws ``examples`` pairs of plants: one set made before a start, one
    before a restart (after SIGTERM, or a SIGKILL while the worker runs a task, whose
    lease the new worker takes back and runs); each start must serve, the CLI and the
    dashboard answer, and what was planted stay."""
    dashboard = Dashboard(producer)

    # no shrinking: each example starts two workers; the failing one is reported
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(first=plants, then=plants, killed=st.booleans())
    def planted_data_is_read_tolerantly_at_start(first: Tuple[List[str], Sequence[Plant]],
                                                 then: Tuple[List[str], Sequence[Plant]],
                                                 killed: bool) -> None:
        workers.stop()
        left: Optional[str] = None
        for kinds, plants in (first, then):
            planted = plant_all(plants, admin)
            if killed and workers.current is not None:
                left = workers.kill(admin, producer)
            workers.stop()
            workers.start(admin, producer)
            if left is not None:  # the killed worker's lease, taken back
                assert ran(admin, left, time.monotonic() + STARTUP), \
                    f"the killed worker's task never ran again: {workers.text()[-3000:]}"
            # (a record is listed only where it was planted: a schedules key of another
            # type refuses it, and is moved aside whole by the start, which writes the
            # app's schedules again in a hash of its own)
            records = ("schedule record" in kinds
                       and planted.get(TIMED.schedules, ("none", None))[0] == "hash")
            answers("schedule record" if records else "", producer, admin, dashboard)
            workers.check()
            kept(admin, planted)

    planted_data_is_read_tolerantly_at_start()
    workers.stop()


def test_every_kind_is_planted_on_one_path() -> None:
    on_paths = [kind for kinds in PATHS.values() for kind in kinds]
    assert sorted(on_paths) == sorted(KINDS)


#: Examples of each path on the thread pool; each starts two workers (more, to hunt:
#: MINITASK_FOREIGN_START_EXAMPLES=50).
EXAMPLES = int(os.environ.get("MINITASK_FOREIGN_START_EXAMPLES", "2"))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("path", list(PATHS))
def test_foreign_data_planted_before_a_worker_starts_or_restarts_never_stops_it(
        path: str, producer: Minitask, admin: "redis.Redis[bytes]", redis_server: Any,
        processes: Any, tmp_path: Path) -> None:
    workers = Workers(processes, redis_server.url, tmp_path, "thread")
    check(workers, producer, admin, kinds_of(path), EXAMPLES)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("pool", ["process", "asyncio"])
def test_foreign_data_of_every_kind_planted_before_a_process_or_asyncio_worker_starts(
        pool: str, producer: Minitask, admin: "redis.Redis[bytes]", redis_server: Any,
        processes: Any, tmp_path: Path) -> None:
    """These pools share the start-up paths with the thread pool: one plant of every
    kind before the start, another before the restart."""
    every_kind = st.tuples(st.just(sorted(KINDS)),
                           st.tuples(*(KINDS[kind] for kind in sorted(KINDS))))
    check(Workers(processes, redis_server.url, tmp_path, pool), producer, admin, every_kind, 1)
