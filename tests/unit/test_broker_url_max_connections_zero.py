"""``?max_connections=0`` in a broker URL is refused, naming the parameter: redis-py reads
0 as no limit on the pool (not as none), so the app was accepted silently with every
bound on its connections lifted. Other values are left to redis-py as before: 1 or
more sizes the pool, a negative or non-number one is refused by its own check."""
from __future__ import annotations

import pytest

from minitask import Minitask
from minitask.broker.connection import connect
from minitask.errors import ConfigurationError
from tests.support.offline import no_network  # noqa: F401 (an autouse fixture)


@pytest.mark.parametrize("url", [
    "redis://127.0.0.1:6379/0?max_connections=0",
    "redis://127.0.0.1:6379/0?max_connections=00",
    "redis://127.0.0.1:6379/0?max_connections=-0",
    "redis://127.0.0.1:6379/0?timeout=5&max_connections=0",
    "redis://127.0.0.1:6379/0?max_connections=0&max_connections=5",  # redis-py takes the first
    "rediss://127.0.0.1:6379/0?max_connections=0",
    "unix:///tmp/redis.sock?max_connections=0",
    "redis+sentinel://127.0.0.1:26379/primary?max_connections=0",
    "redis+cluster://127.0.0.1:7000/0?max_connections=0",
])
def test_max_connections_zero_is_refused_naming_it(url: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        connect(url)
    said = str(raised.value)
    assert said.startswith(f"invalid broker URL {url!r}: max_connections must be 1 or more"), said
    assert "no limit" in said, said


def test_the_app_refuses_it_too_and_hides_the_password() -> None:
    app = Minitask("zero", broker="redis://:pw1@127.0.0.1:6379/0?max_connections=0")
    try:
        with pytest.raises(ConfigurationError, match="max_connections must be 1 or more") \
                as raised:
            app.broker
        assert "pw1" not in str(raised.value)
    finally:
        app.close()


def test_other_values_are_as_before() -> None:
    client = connect("redis://127.0.0.1:6379/0?max_connections=1").client
    assert client.connection_pool.max_connections == 1  # type: ignore[union-attr]
    client.close()
    client = connect("redis://127.0.0.1:6379/0?max_connections=").client  # empty: the default
    assert client.connection_pool.max_connections == 100  # type: ignore[union-attr]
    client.close()
    for bad in ("-5", "abc", "1.5"):
        with pytest.raises(ConfigurationError, match="max_connections"):
            connect(f"redis://127.0.0.1:6379/0?max_connections={bad}")
