"""A broker URL's query is checked as its client is made: an option no redis-py
connection takes, or a socket wait it cannot use (``nan``, ``inf``, ``-1``, ``0``,
``1e308``), was accepted and failed only at the first command, with a raw
``TypeError``, ``ValueError`` or ``OverflowError`` from inside redis-py (or, for 0,
a non-blocking socket and "is Redis running?" on every call). Each is now a
``ConfigurationError`` naming the option; what redis-py can use is taken as before."""
from __future__ import annotations

import pytest

from minitask import Minitask
from minitask.broker.connection import connect
from minitask.errors import BrokerError, ConfigurationError
from tests.support.offline import no_network  # noqa: F401  (autouse)

BASE = "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "-1", "0", "0.0", "1e308",
                                   "31536001"])
@pytest.mark.parametrize("name", ["socket_timeout", "socket_connect_timeout"])
def test_a_socket_wait_it_cannot_use_is_refused_naming_it(name: str, value: str) -> None:
    url = f"{BASE}?{name}={value}"
    with pytest.raises(ConfigurationError) as raised:
        connect(url)
    said = str(raised.value)
    assert said.startswith(f"invalid broker URL {url!r}: {name} must be a number of "
                           f"seconds above 0 and at most 31536000"), said
    assert repr(value) in said, said
    if float(value) == 0:
        assert "non-blocking" in said, said


@pytest.mark.parametrize("url", [
    f"{BASE}?foo=bar",
    f"{BASE}?socket_timeout=2&foo=bar",
    "rediss://127.0.0.1:6379/0?foo=bar",
    "unix:///tmp/redis.sock?foo=bar",
    "unix:///tmp/redis.sock?socket_keepalive=true&foo=bar",
    "redis+sentinel://127.0.0.1:26379/primary?foo=bar",
    "redis+cluster://127.0.0.1:7000/0?foo=bar",
])
def test_an_option_no_connection_takes_is_refused_naming_it(url: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        connect(url)
    said = str(raised.value)
    assert said.startswith(f"invalid broker URL {url!r}: unknown option"), said
    assert "'foo'" in said, said


@pytest.mark.parametrize("query", ["ssl=true", "ssl_cert_reqs=none",
                                   "ssl_ca_certs=/ca.crt&ssl_cert_reqs=required"])
def test_tls_options_on_a_plain_url_point_at_rediss(query: str) -> None:
    with pytest.raises(ConfigurationError, match="TLS options need a rediss:// URL"):
        connect(f"{BASE}?{query}")


@pytest.mark.parametrize("url", [
    f"{BASE}?socket_timeout=2.5&socket_connect_timeout=1",
    f"{BASE}?socket_timeout=31536000",
    f"{BASE}?client_name=billing&retry_on_timeout=true&health_check_interval=5",
    f"{BASE}?max_connections=5&timeout=3",
    f"{BASE}?db=3&socket_keepalive=false",
    "rediss://127.0.0.1:6379/0?ssl_cert_reqs=none&ssl_check_hostname=false",
    "unix:///tmp/redis.sock?socket_timeout=1&db=2",
    "redis+sentinel://127.0.0.1:26379/primary?ssl=true&sentinel_socket_timeout=2",
])
def test_what_redis_py_can_use_is_taken(url: str) -> None:
    client = connect(url).client
    client.close()


def test_a_cluster_url_takes_its_nodes_options_up_to_the_first_connection() -> None:
    url = ("redis+cluster://127.0.0.1:7000/0?ssl=true&ssl_cert_reqs=required"
           "&max_connections=5&socket_timeout=3&require_full_coverage=false")
    with pytest.raises(BrokerError) as raised:  # no network here: its nodes are unreachable
        connect(url)
    assert "cannot be connected" in str(raised.value), raised.value


def test_the_app_refuses_it_before_a_send_and_hides_the_password() -> None:
    app = Minitask("query", broker="redis://:pw1@127.0.0.1:6379/0?socket_timeout=nan")
    try:
        @app.task
        def add(a: int, b: int) -> int:
            return a + b

        with pytest.raises(ConfigurationError, match="socket_timeout must be") as raised:
            add.delay(1, 2)
        assert "pw1" not in str(raised.value)
    finally:
        app.close()
