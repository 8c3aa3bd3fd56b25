"""Data in Redis that minitask did not write never stops a worker, the CLI or the
dashboard (issue 29, section 1): a property test on a real redis-server with a
real worker process.

For each kind of key minitask owns, Hypothesis plants values of every wrong
type, non-finite and out-of-range numbers, non-UTF-8 bytes, control characters
and huge values (fair-queue group keys: with their group's token in the queue's
ready list, so that the worker's fetch meets them); after each, a task of another
queue must run within a second, the worker must be alive (on the thread pool, and
on the process and asyncio pools), ``minitask status``, ``schedules`` (which lists
a schedule record it cannot read, never hides it), ``inspect`` (a task, and the
running, scheduled and recent listings) and ``dead list`` must answer (exit 0, no
raw escape character), every dashboard page must answer 200 with no raw escape
character, and a broadcast call the worker ran before must still be joined and
its status read (``join``, ``join(subscribers=...)``, ``status``, ``subscribers``).
The planted data is left as it was: nothing deletes or renames it.
"""
from __future__ import annotations

import contextlib
import io
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
import redis
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from minitask import Minitask, discovery
from minitask.broker.keys import AppKeys, queue_keys
from minitask.cli.main import main
from minitask.dashboard.web import Dashboard
from minitask.periodic import MAX_NAME_BYTES
from minitask.stores.names import MEMBER_BYTES
from tests.apps.foreign import build

pytestmark = pytest.mark.integration

APP = "tests.apps.foreign"
SUBSCRIBER = "sub1"
TIMED, NEWS = queue_keys("foreign", "timed"), queue_keys("foreign", "news")
OTHER = queue_keys("foreign", "other")
REGISTRY = AppKeys("foreign")
#: A task that waits in queue ``other`` for an hour: its progress key gets planted data.
WAITING = "waiting-with-progress"
#: How soon a task of the untouched queue must run, planted data or not (s).
WITHIN = 1.0
#: id(producer) -> the handle of a broadcast call its worker ran before any plant (none
#: for the start-up test's producer: no worker runs before its first plants).
HEARD: Dict[int, Any] = {}

# -- what is planted -----------------------------------------------------------------

NUMBERS = st.sampled_from([b"nan", b"inf", b"-inf", b"1e400", b"1e300", b"1.5", b"-1",
                           b"abc", b"", b"99999999999999999999999999", b"0x10", b" 7"])
TEXTS = st.one_of(st.binary(max_size=40), st.sampled_from(
    [b"\xff\xfe", b"a b", b"\x1b[2J\x1b[31mred", b"line\nforged: ERROR", b"\xc3", b"x" * 70000]))
VALUES = st.one_of(NUMBERS, TEXTS)
SCORES = st.one_of(st.sampled_from([float("inf"), float("-inf"), 1e300, 1.5, -5.0, 2.0 ** 62]),
                   st.floats(allow_nan=False))
TYPES = st.sampled_from(["string", "list", "set", "zset", "hash"])


def plant_type(client: "redis.Redis[bytes]", key: str, kind: str, value: bytes) -> None:
    """Make ``key`` a ``kind`` holding ``value`` (or a string, if minitask keeps a
    ``kind`` there: then it is another type all the same)."""
    client.delete(key)
    if kind == "list":
        client.rpush(key, value)
    elif kind == "set":
        client.sadd(key, value)
    elif kind == "zset":
        client.zadd(key, {value: 1})
    elif kind == "hash":
        client.hset(key, value or b"f", value)
    else:
        client.set(key, value)


def fresh_field(client: "redis.Redis[bytes]", key: str, field: bytes, value: bytes) -> None:
    """A hash ``key`` holding this one field (whatever an earlier example left there)."""
    client.delete(key)
    client.hset(key, field, value)


#: Stream entry ids minitask never writes (its ids are Redis's clock): the last id there
#: is (no XADD can follow it), ids past the year 9999.
PLANTED_IDS = st.sampled_from([b"18446744073709551615-18446744073709551615",
                               b"18446744073709551615-0", b"253402300800000-0"])


def plant_stream(client: "redis.Redis[bytes]", key: str, entry_id: bytes) -> None:
    """A stream ``key`` whose last entry has ``entry_id`` (none set aside before it)."""
    client.delete(key, key + "_aside")
    client.xadd(key, {b"id": b"planted"}, id=entry_id)


def plant_orders(client: "redis.Redis[bytes]", kind: str, value: bytes) -> None:
    """The orders list of the worker under test (``--name sub1``) made a ``kind``."""
    for member in client.zrange(REGISTRY.workers, 0, -1):
        name = member.decode("utf-8", "replace")
        if client.hget(REGISTRY.worker(name), "name") == SUBSCRIBER.encode():
            plant_type(client, REGISTRY.control(name), kind, value)


def wrong_type(key: str, kept: str) -> Any:
    """A strategy of planters making ``key`` of any type other than ``kept``."""
    return st.tuples(TYPES.filter(lambda kind: kind != kept), VALUES).map(
        lambda planted: lambda client: plant_type(client, key, *planted))


def plant_group(client: "redis.Redis[bytes]", part: str, kind: str, value: bytes) -> None:
    """A fair-queue group key of queue ``other`` of another type, and the group's
    token in the queue's ready list, so that the worker's fetch meets it: group g1's
    ``ready`` (its turn claiming the token, so that the fetch reads the set), or g2's
    ``turn``."""
    group = "g1" if part == "ready" else "g2"
    plant_type(client, OTHER.fair_group(group, part), kind, value)
    token = b"\xff1.1\xff" + group.encode()
    if part == "ready":
        client.hset(OTHER.fair_group(group, "turn"), mapping={"tok": "1.1", "band": "5"})
    client.rpush(OTHER.ready[4], token)
    client.zadd(OTHER.cancelled, {token: 5})


#: kind of key -> a strategy of planters (each takes a client and plants)
PLANTS: Dict[str, Any] = {
    "group ready": st.tuples(TYPES.filter(lambda kind: kind != "zset"), VALUES).map(
        lambda planted: lambda client: plant_group(client, "ready", *planted)),
    "group turn": st.tuples(TYPES.filter(lambda kind: kind != "hash"), VALUES).map(
        lambda planted: lambda client: plant_group(client, "turn", *planted)),
    "tick": SCORES.map(lambda score: lambda client: client.zadd(
        TIMED.ticks, {b"hourly": score})),
    "ticks": wrong_type(TIMED.ticks, "zset"),
    "schedules": wrong_type(TIMED.schedules, "hash"),
    "fired": wrong_type(TIMED.fired, "hash"),
    "cursor": VALUES.map(lambda value: lambda client: client.hset(
        NEWS.broadcast("cursors"), SUBSCRIBER, value)),
    "cursors": wrong_type(NEWS.broadcast("cursors"), "hash"),
    # join()'s who (probe29r M2: it made join() and status() of every call raise)
    "since": wrong_type(NEWS.broadcast("since"), "zset"),
    "queue registry": TEXTS.map(lambda name: lambda client: client.sadd(REGISTRY.queues,
                                                                        name or b"\x00")),
    "metrics": st.one_of(
        wrong_type(REGISTRY.metrics, "hash"),
        st.tuples(TEXTS, VALUES).map(lambda planted: lambda client: fresh_field(
            client, REGISTRY.metrics, planted[0] or b"f", planted[1]))),
    "throughput": st.one_of(
        st.tuples(TYPES.filter(lambda kind: kind != "hash"), VALUES).map(
            lambda planted: lambda client: plant_type(client, this_minute(), *planted)),
        st.tuples(TEXTS, VALUES).map(lambda planted: lambda client: fresh_field(
            client, this_minute(), planted[0] or b"q", planted[1]))),
    "progress": st.one_of(
        wrong_type(OTHER.progress(WAITING), "string"),
        VALUES.map(lambda value: lambda client: client.set(OTHER.progress(WAITING), value))),
    "cancels": st.one_of(
        wrong_type(OTHER.cancels, "stream"),
        PLANTED_IDS.map(lambda entry_id: lambda client: plant_stream(client, OTHER.cancels,
                                                                     entry_id))),
    "orders": st.tuples(TYPES.filter(lambda kind: kind != "list"), VALUES).map(
        lambda planted: lambda client: plant_orders(client, *planted)),
    "schedule record": st.tuples(TEXTS, VALUES).map(
        lambda planted: lambda client: client.hset(TIMED.schedules, planted[0] or b"f",
                                                   planted[1])),
    "clock skew": VALUES.map(lambda value: lambda client: (
        client.zadd(REGISTRY.workers, {b"skewed": time.time() * 1000}),
        client.hset(REGISTRY.worker("skewed"), mapping={
            "beat_ms": int(time.time() * 1000), "name": "skewed", "clock_skew_ms": value}))),
    "worker registry": st.tuples(TEXTS, VALUES).map(
        lambda planted: lambda client: (
            client.zadd(REGISTRY.workers, {planted[0] or b"w": time.time() * 1000}),
            client.hset(REGISTRY.worker(planted[0].decode("utf-8", "replace") or "w"),
                        mapping={"beat_ms": planted[1], "processed": planted[1],
                                 "name": planted[0], "host": planted[0]}))),
    # a lease deadline or a time of death that is no time (inf said "for ever", or
    # 9999-12-31): shown as unreadable, never a date
    "lease score": SCORES.map(lambda score: lambda client: client.zadd(
        OTHER.leases, {b"planted-lease\x1b[31m": score})),
    "dead score": SCORES.map(lambda score: lambda client: client.zadd(
        OTHER.dead, {b"planted-dead\xe2\x80\xae": score})),
}

# -- helpers ---------------------------------------------------------------------


def this_minute() -> str:
    """The throughput key of the minute now (the dashboard's chart reads it)."""
    return REGISTRY.throughput(int(time.time() * 1000) // 60_000)


def snapshot(client: "redis.Redis[bytes]", key: str) -> Tuple[bytes, Any]:
    """A key's type and its DUMP: unchanged means nothing was written to it. A hash's
    fields and values instead: a read by field (HGET, as a page of schedules reads)
    moves a hash Redis is growing along, and so the order DUMP writes it in. The queue
    registry's members no longer than a name (a longer one is removed, said once)."""
    kind = client.type(key)
    if kind == b"set" and key == REGISTRY.queues:  # its members, but those longer than
        # a name: the first listing removes such a one, unsent (names_page.lua)
        return kind, sorted(member for member in client.smembers(key)
                            if len(member) <= MEMBER_BYTES)
    return kind, sorted(client.hgetall(key).items()) if kind == b"hash" else client.dump(key)


#: Keys a worker moves aside whole (to ``<key>:foreign``, ``:foreign2``...) when they hold
#: another type than these: the schedule keys, to write the app's schedules again (probe29r
#: L4); the metrics hash, when a heartbeat adds its counts (probe33 F4: a heartbeat inside
#: the check window moved it, and the comparison failed now and then)
MOVED_ASIDE = {TIMED.schedules: b"hash", TIMED.fired: b"hash", TIMED.ticks: b"zset",
               REGISTRY.metrics: b"hash"}


def kept_snapshot(client: "redis.Redis[bytes]", key: str,
                  before: Tuple[bytes, Any]) -> Tuple[bytes, Any]:
    """``key``'s snapshot, or ``before`` when it was moved aside whole, unchanged."""
    now = snapshot(client, key)
    if key in MOVED_ASIDE and before[0] not in (MOVED_ASIDE[key], b"none") and now != before:
        places = [f"{key}:foreign{n if n > 1 else ''}" for n in range(1, 101)]
        if any(snapshot(client, place) == before for place in places):
            return before
    return now


def overlong(seen: Tuple[bytes, Any]) -> List[bytes]:
    """The fields of a schedules snapshot a listing takes out: a name longer than any
    schedule's (a record longer than the app writes is left in place)."""
    if seen[0] != b"hash":
        return []
    return [field for field, _ in seen[1] if len(field) > MAX_NAME_BYTES]


def bounded(key: str, seen: Tuple[bytes, Any], out: List[bytes]) -> Tuple[bytes, Any]:
    """A snapshot without the schedules fields ``out``."""
    if key != TIMED.schedules or seen[0] != b"hash":
        return seen
    return seen[0], [(field, value) for field, value in seen[1] if field not in out]


def planted_keys(kind: str, client: "redis.Redis[bytes]") -> List[str]:
    """The keys compared before and after: the metrics key only when it is the one
    planted and of another type than a hash (a hash, even one holding a planted
    field, is the worker's to add its own counts to with each heartbeat)."""
    metrics = kind == "metrics" and client.type(REGISTRY.metrics) not in (b"hash", b"none")
    return [TIMED.ticks, TIMED.schedules, TIMED.fired, NEWS.broadcast("cursors"),
            NEWS.broadcast("since"),
            REGISTRY.queues, OTHER.progress(WAITING), OTHER.cancels,
            OTHER.fair_group("g1", "ready"), OTHER.fair_group("g2", "turn"),
            *([REGISTRY.metrics] if metrics else [])]


def ran(client: "redis.Redis[bytes]", token: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if token.encode() in client.lrange("marks:other", 0, -1):
            return True
        time.sleep(0.01)
    return False


@pytest.fixture(autouse=True)
def entry_points_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each CLI call reads the installed distributions' entry points twice, about half
    its time (the CLI's is most of this module's): they cannot change while the module
    runs, so the CLI here gets the first reading's answer, the same list."""
    read: Dict[str, Any] = {}
    real = discovery.entry_points_of

    def entry_points_of(group: str) -> Any:
        if group not in read:
            read[group] = real(group)
        return list(read[group])

    monkeypatch.setattr(discovery, "entry_points_of", entry_points_of)


def cli(*argv: str) -> Tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


def page(dashboard: Dashboard, path: str) -> str:
    """The page's status, and " with raw escapes" when it shows a control character
    or a bidi override raw."""
    seen: Dict[str, str] = {}

    def start_response(status: str, headers: List[Tuple[str, str]]) -> None:
        seen["status"] = status

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "",
               "wsgi.input": io.BytesIO(b""), "CONTENT_LENGTH": "0",
               "HTTP_HOST": "127.0.0.1:5555"}
    body = b"".join(dashboard(environ, start_response))
    html = body.replace(dashboard.live_js.encode(), b"")  # its source names escapes
    raw = any(char.encode() in html for char in ("\x1b", "\u202e", "\x07"))
    return seen["status"] + (" with raw escapes" if raw else "")


@pytest.fixture
def serve(redis_server: Any, admin: "redis.Redis[bytes]", processes: Any,
          monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Callable[[str], Minitask]]:
    """Start a worker of tests.apps.foreign on ``pool`` serving other, timed and news,
    running; the producer's app. The worker must still be alive at the end."""
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    producer = build(redis_server.url)
    started = []

    def start(pool: str) -> Minitask:
        log = tmp_path / f"worker-{pool}.log"
        started.append((processes.worker(
            APP, "-Q", "other,timed,news", "--pool", pool, "-c", "2", "--name", SUBSCRIBER,
            env={"MINITASK_BROKER_URL": redis_server.url}, log=log), log))
        token = uuid.uuid4().hex
        producer.tasks["mark"].delay(token)
        assert ran(admin, token, time.monotonic() + 30), "the worker did not start"
        producer.tasks["mark"].apply_async(("later",), task_id=WAITING, delay=3600)
        heard = producer.tasks["hear"].delay(7)  # a broadcast call sub1 ran: its readers
        assert heard.join(timeout=30) == {SUBSCRIBER: 7}  # must answer whatever is planted
        HEARD[id(producer)] = heard
        return producer

    try:
        yield start
        for worker, log in started:
            assert worker.poll() is None, log.read_text()[-3000:]
    finally:
        HEARD.pop(id(producer), None)  # an id a later producer may be given
        producer.close()


def answers(kind: str, producer: Minitask, admin: "redis.Redis[bytes]",
            dashboard: Dashboard) -> None:
    """A task of queue ``other`` runs within WITHIN; the CLI and the dashboard answer as
    the module says, with data of ``kind`` planted."""
    token = uuid.uuid4().hex
    producer.tasks["mark"].delay(token)
    assert ran(admin, token, time.monotonic() + WITHIN), \
        f"no task of queue 'other' ran within {WITHIN} s"
    code, text = cli("status", "-A", APP)
    assert code == 0 and "Traceback" not in text and "\x1b" not in text, text[-2000:]
    code, text = cli("schedules", "-A", APP)
    assert code == 0 and "Traceback" not in text and "\x1b" not in text, text[-2000:]
    if kind == "schedule record":  # no planted value is a record: listed, not hidden
        assert "unreadable schedule record" in text and "hourly" in text, text[-2000:]
    for argv in ([WAITING], ["running"], ["scheduled"], ["recent"]):
        code, text = cli("inspect", "-A", APP, *argv)
        assert code == 0 and "Traceback" not in text and "\x1b" not in text, text[-2000:]
    code, text = cli("dead", "-A", APP, "list")
    assert code == 0 and "Traceback" not in text and "\x1b" not in text, text[-2000:]
    assert "9999-12-31" not in text and "1970-01-01" not in text, text[-2000:]
    assert producer.handle(WAITING).progress() is None or kind != "progress"
    heard = HEARD.get(id(producer))  # never a BrokerError (issue 29 section 1)
    if heard is not None:
        assert heard.join(timeout=WITHIN) == {SUBSCRIBER: 7}
        assert heard.join(timeout=WITHIN, subscribers=[SUBSCRIBER]) == {SUBSCRIBER: 7}
        # (none listed once since and cursors are both planted: the pools' run stacks them)
        assert heard.status() == "succeeded" and heard.subscribers() in ([SUBSCRIBER], [])
    for path in ("/", "/workers", "/dead", "/schedules", "/metrics", "/api/queues",
                 f"/task/{WAITING}", "/running", "/scheduled", "/recent"):
        assert page(dashboard, path) == "200 OK", path


def check(kind: str, producer: Minitask, admin: "redis.Redis[bytes]", examples: int) -> None:
    """Plant ``examples`` values of ``kind``, each on top of the last; after each, the
    worker, the CLI and the dashboard must answer as the module says."""
    dashboard = Dashboard(producer)

    # No shrinking (nor its explain phase): a failing example is reported as planted,
    # after one replay. Each example drives a live worker, the CLI and the dashboard;
    # once one failed (under load, likeliest a task not run within WITHIN), Hypothesis
    # replayed variants of it for minutes, each under its line tracer (explain), and
    # caught pytest-timeout's failure as one more to shrink: no limit ended the test
    # (a parallel run hung past 120 s; a planted failure took 149 s at --timeout=60).
    @settings(max_examples=examples, deadline=None, derandomize=True,
              phases=(Phase.explicit, Phase.reuse, Phase.generate),
              suppress_health_check=list(HealthCheck))
    @given(plant=PLANTS[kind])
    def planted_data_is_read_tolerantly(plant: Callable[["redis.Redis[bytes]"], Any]) -> None:
        plant(admin)
        before = {key: snapshot(admin, key) for key in planted_keys(kind, admin)}
        answers(kind, producer, admin, dashboard)
        # what was planted is still there, as it was (a cursor or a tick minitask
        # replaces is minitask's to replace, a cancels stream with an id minitask never
        # writes is set aside whole: those are exempt; a key that did not exist yet is
        # no planted data; nor is the schedule's own tick, re-armed when it fires: a run
        # across the top of an hour saw it move)
        if kind not in ("cursor", "tick", "cancels"):
            kept = [key for key, seen in before.items()
                    if seen[0] != b"none" and key != TIMED.ticks]
            after = {key: kept_snapshot(admin, key, before[key]) for key in kept}
            # a schedule field name longer than minitask writes is taken out by the
            # listing that meets it (schedule_page.lua): exempt, the rest kept as it was
            out = overlong(before[TIMED.schedules])
            assert ({key: bounded(key, seen, out) for key, seen in after.items()}
                    == {key: bounded(key, before[key], out) for key in kept})

    planted_data_is_read_tolerantly()


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_foreign_data_in_a_key_never_stops_the_worker_the_cli_or_the_dashboard(
        kind: str, serve: Callable[[str], Minitask], admin: "redis.Redis[bytes]") -> None:
    check(kind, serve("thread"), admin, examples=12)


#: Examples of each kind on the process and asyncio pools: the thread pool's run above
#: tries twelve of each; these two pools share the fetch and the stores with it, so a
#: few of each, planted on top of one another in one worker, bound their added time.
OTHER_POOLS_EXAMPLES = 3


@pytest.mark.timeout(90)  # about 5 s each on a quiet machine
@pytest.mark.parametrize("pool", ["process", "asyncio"])
def test_foreign_data_in_every_kind_of_key_never_stops_a_process_or_asyncio_worker(
        pool: str, serve: Callable[[str], Minitask], admin: "redis.Redis[bytes]") -> None:
    producer = serve(pool)
    for kind in sorted(PLANTS):
        check(kind, producer, admin, examples=OTHER_POOLS_EXAMPLES)
