"""A broker URL's ``ssl_cert_reqs`` is checked as the client is made: redis-py reads
only ``none``, ``optional`` and ``required``, and refused any other word (such as
Python's own ``CERT_NONE``) only as it opened the first connection, so the app
started and its first command failed (issue 29, trial LOW). No Redis is reached."""
from __future__ import annotations

import pytest

from minitask.broker.connection import connect
from minitask.errors import ConfigurationError


@pytest.mark.parametrize("value, hint", [("CERT_NONE", "'none' here"),
                                         ("cert_required", "'required' here"),
                                         ("None", "'none' here"),
                                         ("off", "")])
def test_a_word_redis_py_does_not_read_is_refused_by_name(value: str, hint: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        connect(f"rediss://127.0.0.1:1/0?ssl_cert_reqs={value}")
    said = str(raised.value)
    assert "ssl_cert_reqs must be one of none, optional, required" in said, said
    assert repr(value) in said and hint in said, said


@pytest.mark.parametrize("value", ["none", "optional", "required"])
def test_the_words_it_reads_are_taken(value: str) -> None:
    connection = connect(f"rediss://127.0.0.1:1/0?ssl_cert_reqs={value}")
    connection.client.close()


def test_a_sentinels_own_is_checked_too() -> None:
    with pytest.raises(ConfigurationError, match="sentinel_ssl_cert_reqs must be one of"):
        connect("redis+sentinel://127.0.0.1:1/mymaster/0?sentinel_ssl=true"
                "&sentinel_ssl_cert_reqs=CERT_NONE")
