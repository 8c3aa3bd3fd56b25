"""A broker URL's scheme is taken in any case, as RFC 3986 says schemes are:
``REDIS://localhost:6379/0`` was refused with redis-py's own "Redis URL must specify
one of the following schemes" (its ``from_url`` compares them as written), though the
scheme had been recognized (probe35, LOW). The client is made as for the lower-case
URL, and described so; an unknown scheme is still refused as the user wrote it."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from minitask.broker.connection import connect
from minitask.errors import ConfigurationError
from tests.support.offline import no_network  # noqa: F401  (autouse)


def _plain(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The connection arguments read from the URL (host, port, db, path, password...)."""
    return {key: value for key, value in kwargs.items()
            if value is None or isinstance(value, (str, int, float))}


@pytest.mark.parametrize("url, expected", [
    ("REDIS://127.0.0.1:6379/3", "redis://127.0.0.1:6379/3"),
    ("Redis://:secret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
    ("REDISS://127.0.0.1:6380/0", "rediss://127.0.0.1:6380/0"),
    ("UNIX:///tmp/redis.sock?db=2", "unix:///tmp/redis.sock?db=2"),
    ("Redis+Sentinel://127.0.0.1:26379/primary/1", "redis+sentinel://127.0.0.1:26379/primary/1"),
])
def test_a_scheme_in_upper_or_mixed_case_is_taken(url: str, expected: str) -> None:
    made = connect(url)
    try:
        assert made.description == expected
        lower = connect(url.split("://", 1)[0].lower() + url[url.index("://"):])
        try:
            ours = _plain(made.client.connection_pool.connection_kwargs)
            assert ours == _plain(lower.client.connection_pool.connection_kwargs)
            assert len(ours) > 3, ours  # (the URL read: not an empty match)
            assert (made.client.connection_pool.connection_class
                    is lower.client.connection_pool.connection_class)
        finally:
            lower.client.close()
    finally:
        made.client.close()


def test_an_unknown_scheme_is_refused_as_written() -> None:
    with pytest.raises(ConfigurationError, match="unsupported broker URL 'FOO://x'"):
        connect("FOO://x")
