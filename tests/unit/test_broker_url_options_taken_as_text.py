"""A broker URL's query gives only text, and redis-py hands the text on as it is unless
it converts the name: options taken only as an object (``?retry=x``), as a number
nothing converts (``?socket_type=7``), ``?connection_class=x`` (whose check itself
failed), ``sentinel_*`` on a ``redis://`` URL, an unknown encoding, a sentinel's
socket wait of ``nan``, a negative health check interval and a db path that is no
number passed the checks and failed at the first command with a raw traceback (or,
for the last two, were taken unsaid). Each is a ``ConfigurationError`` naming it;
what a URL can carry is taken as before."""
from __future__ import annotations

import pytest

from minitask.broker.connection import connect
from minitask.broker.replies import require_readable_replies
from minitask.errors import ConfigurationError
from tests.support.offline import no_network  # noqa: F401  (autouse)

BASE = "redis://127.0.0.1:6379/0"
SENTINEL = "redis+sentinel://127.0.0.1:26379/primary"


@pytest.mark.parametrize("name", ["retry", "credential_provider", "redis_connect_func",
                                  "event_dispatcher", "driver_info", "socket_type",
                                  "connection_class", "socket_keepalive_options",
                                  "parser_class"])
def test_an_option_a_url_cannot_give_is_refused_naming_it(name: str) -> None:
    url = f"{BASE}?{name}=7"
    with pytest.raises(ConfigurationError) as raised:
        connect(url)
    said = str(raised.value)
    assert said.startswith(f"invalid broker URL {url!r}: option {name!r} cannot be "
                           f"given in a URL"), said
    assert "\n" not in said


@pytest.mark.parametrize("url", [f"{SENTINEL}?retry=x", f"{SENTINEL}?sentinel_retry=x",
                                 "redis+cluster://127.0.0.1:7000/0?cache_config=x"])
def test_other_schemes_refuse_them_too(url: str) -> None:
    with pytest.raises(ConfigurationError, match="cannot be given in a URL"):
        connect(url)


def test_sentinel_options_on_a_plain_url_are_unknown() -> None:
    with pytest.raises(ConfigurationError, match="unknown option 'sentinel_foo'"):
        connect(f"{BASE}?sentinel_foo=1")
    with pytest.raises(ConfigurationError, match="unknown option 'sentinel_socket_timeout'"):
        connect(f"{BASE}?sentinel_socket_timeout=2")
    with pytest.raises(ConfigurationError, match="'foo'"):  # the sentinels' client's
        connect(f"{SENTINEL}?sentinel_foo=1")


@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf"])
@pytest.mark.parametrize("name", ["sentinel_socket_timeout", "sentinel_socket_connect_timeout"])
def test_a_sentinel_wait_it_cannot_use_is_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError,
                       match=f"{name} must be a number of seconds above 0"):
        connect(f"{SENTINEL}?{name}={value}")


@pytest.mark.parametrize("query, said", [
    ("encoding=bogus-enc", "encoding 'bogus-enc' is no encoding Python knows"),
    ("encoding_errors=bogus", "encoding_errors 'bogus' is no encoding errors handler"),
    ("health_check_interval=-5", "health_check_interval must be 0 (no checks) or more"),
])
def test_values_redis_py_cannot_use_are_refused(query: str, said: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        connect(f"{BASE}?{query}")
    assert said in str(raised.value), raised.value


@pytest.mark.parametrize("path", ["abc", "-1", "1.5"])
def test_a_db_that_is_no_number_is_refused(path: str) -> None:
    with pytest.raises(ConfigurationError, match="names the db by its number"):
        connect(f"redis://127.0.0.1:6379/{path}")


def test_a_protocol_other_than_3_is_named_as_given() -> None:
    client = connect(f"{BASE}?protocol=9").client
    with pytest.raises(ConfigurationError) as raised:
        require_readable_replies(client, "it")
    assert "protocol=9:" in str(raised.value) and "RESP3" not in str(raised.value)


@pytest.mark.parametrize("url", [
    f"{BASE}?encoding=latin-1&encoding_errors=replace&client_name=x&lib_name=y",
    f"{BASE}?health_check_interval=0&socket_read_size=1024",
    "redis://127.0.0.1:6379/12",
    f"{SENTINEL}?sentinel_socket_timeout=2&sentinel_password=p&db=1",
    "redis+cluster://127.0.0.1:7000/0?require_full_coverage=false&read_from_replicas=true",
])
def test_what_a_url_can_carry_is_taken(url: str) -> None:
    try:
        connect(url).client.close()
    except ConfigurationError:
        raise
    except Exception:  # a cluster's nodes are unreachable here: its options were taken
        pass
