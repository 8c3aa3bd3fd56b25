"""Shared fixtures and hooks: a manual clock, fakeredis, a real redis-server, apps,
subprocesses. The helpers behind them live in tests/support/."""
from __future__ import annotations

import functools
import gc
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional

import fakeredis
import pytest
import redis

from minitask import Minitask
from tests.support.clock import ManualClock
from tests.support.foreign_said import said_afresh
from tests.support.paths import ROOT
from tests.support.processes import Processes
from tests.support.servers import RedisServer, check_version, described, redis_server_binary


def pytest_report_header() -> str:
    binary = redis_server_binary()
    return f"redis-server: {binary}: {described(binary)}"


@pytest.fixture(autouse=True)
def foreign_data_said_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """What this process said of foreign data is forgotten before each test: its say-once
    memory (five lines a key a minute) would hold back a line a test looks for when an
    earlier test in the same process planted in the same key."""
    said_afresh(monkeypatch)


@pytest.fixture(scope="session", autouse=True)
def dashboard_templates_compiled_once() -> Iterator[None]:
    """Every Dashboard makes its own Jinja environment, which compiles each template on
    its first page: 0.5-1 s per dashboard, for hundreds of tests. Jinja's own bytecode
    cache keeps what the first compiled for the session (keyed by the template's name
    and source), so each dashboard still loads and renders every template itself."""
    try:
        import jinja2
        from minitask.dashboard import web
    except ImportError:  # without the dashboard extra: no dashboard to test
        yield
        return

    class Compiled(jinja2.BytecodeCache):
        def __init__(self) -> None:
            self.codes: Dict[str, bytes] = {}

        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            if bucket.key in self.codes:
                bucket.bytecode_from_string(self.codes[bucket.key])

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            self.codes[bucket.key] = bucket.bytecode_to_string()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(web, "Environment",
                      functools.partial(web.Environment, bytecode_cache=Compiled()))
        yield


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(0, tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        check_version(server)
        yield server
    finally:
        server.stop()


@pytest.fixture
def admin(redis_server: RedisServer) -> Iterator["redis.Redis[bytes]"]:
    """A client of the suite's own redis-server, emptied first: every test starts empty."""
    client = redis_server.client()
    client.flushall()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def start_redis(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Start extra, test-owned servers (e.g. with persistence); all stop at teardown."""
    started: List[RedisServer] = []

    def start(*extra: str, port: Optional[int] = None) -> RedisServer:
        server = RedisServer(port or 0, tmp_path / f"redis-{len(started)}",
                             list(extra))
        server.start()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake_redis() -> "redis.Redis[bytes]":
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.integration)])
def redis_client(request: pytest.FixtureRequest) -> Iterator["redis.Redis[bytes]"]:
    """The same test against fakeredis and against the suite's own redis-server."""
    if request.param == "fake":
        yield fakeredis.FakeRedis(server=fakeredis.FakeServer())
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    client = server.client()
    client.flushall()  # our own server: every test starts empty
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def make_app(redis_client: "redis.Redis[bytes]",
             clock: ManualClock) -> Callable[..., Minitask]:
    """Apps on ``redis_client`` with the manual clock, unless told otherwise."""

    def make(name: str = "test", **options: Any) -> Minitask:
        options.setdefault("clock", clock)
        return Minitask(name, broker=options.pop("broker", redis_client), **options)

    return make


#: Where an ``app`` fixture's broker is (``@pytest.mark.app(on=...)``).
_APP_BROKERS = ("fake", "server", "offline")


@pytest.fixture
def app(request: pytest.FixtureRequest, clock: ManualClock) -> Iterator[Minitask]:
    """The test's app, closed at teardown: named "test", on a fresh fakeredis with the
    manual clock, unless ``@pytest.mark.app(name, on=..., **options)`` on the test or its
    module says otherwise; ``options`` are the Minitask's own. ``on`` is where its broker is:

    * ``"fake"``: the test's ``fake_redis``, with the manual clock;
    * ``"server"``: the suite's redis-server, through its URL, emptied first; real time;
    * ``"offline"``: a URL where nothing listens, for apps that must not touch Redis; real time.

    ``build=`` a test app's ``build(url)`` (``tests.apps.foreign.build``, say), with
    ``on="server"``: that app instead, and ``MINITASK_BROKER_URL`` set to the server for
    the commands the test runs in-process. For an app on both fakeredis and the suite's
    server, use ``make_app``.
    """
    marker = request.node.get_closest_marker("app")
    args = marker.args if marker else ()
    options = dict(marker.kwargs) if marker else {}
    name = args[0] if args else options.pop("name", "test")
    on = options.pop("on", "fake")
    assert on in _APP_BROKERS, f"@pytest.mark.app(on={on!r}): not one of {_APP_BROKERS}"
    build = options.pop("build", None)
    assert build is None or (on == "server" and not options and not args), \
        "@pytest.mark.app(build=...): on the server, with no other options"
    if on == "fake":
        options.setdefault("clock", clock)
        broker: Any = request.getfixturevalue("fake_redis")
    elif on == "server":
        request.getfixturevalue("admin")  # empties the server
        broker = request.getfixturevalue("redis_server").url
    else:
        broker = "redis://127.0.0.1:1/0"  # port 1: nothing listens there
    if build:
        request.getfixturevalue("monkeypatch").setenv("MINITASK_BROKER_URL", broker)
    made = build(broker) if build else Minitask(name, broker=broker, **options)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("MINITASK_BROKER_URL", None)
    owner = Processes(env, ROOT)
    try:
        yield owner
    finally:
        owner.kill_all()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "app(name='test', on='fake', **options): the name, broker and Minitask "
        "options of the test's app fixture (see tests/conftest.py)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Print the sockets still open at the end of the session that only reference
    cycles kept (a client held by a closure or a finished thread's state), instead of
    failing a run in which every test passed: pytest would find them in its last
    collection, blaming no test, and only in some runs. A socket freed while a test
    runs still fails that test (``filterwarnings = error``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    for found in caught:
        print(f"\nleft open at the end of the test session: {found.message}")


def _utf8_safe(value: Any) -> Any:
    """``value`` with every string encodable as UTF-8 (a lone surrogate escaped)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_utf8_safe(key): _utf8_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_utf8_safe(item) for item in value)
    return value


@pytest.hookimpl(hookwrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Generator[None, Any, None]:
    """A report an xdist process sends its controller in UTF-8: a test's output or failure
    that holds a lone surrogate (the suite plants them in foreign data) otherwise ends the
    whole run with an INTERNALERROR instead of reporting that test."""
    outcome = yield
    data = outcome.get_result()
    if data is not None:
        outcome.force_result(_utf8_safe(data))
