"""Passwords never show, whatever shape the broker URL has: valid, malformed or schemeless.

The secrets below are made of tokens (``pw1``, ``pw2``) that appear nowhere else in
the URL, so a token found in a message is a leak, even of part of a password.
"""
from __future__ import annotations

import re
from typing import List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitask.broker.connection import connect, mask_url, translate
from minitask.errors import BrokerError, ConfigurationError
from tests.support.offline import no_network  # noqa: F401 (an autouse fixture)

TOKENS = re.compile(r"pw\d")


URLS = [
    # no scheme, or a broken one
    ":pw1@127.0.0.1:6379", ":pw1@127.0.0.1:6379/0", "user:pw1@127.0.0.1:6379",
    "pw1@127.0.0.1", "//:pw1@host", "redis:/:pw1@host", "redis:pw1@host",
    "redis//:pw1@host", "redis:///:pw1@host", " redis://:pw1@host", "\tredis://:pw1@host",
    "redis:/user:pw1@host", "http://user:pw1@host", "localhost:pw1", ":pw1", "user:pw1",
    # no host, or the password where the port goes
    "redis://:pw1", "redis://user:pw1", "redis://:pw1@", "redis://host:6379:pw1",
    "redis://[::1]:pw1", "redis+cluster://h1:7000,user:pw1",
    # unencoded delimiters in the password
    "redis://:pw1/pw2@host:6379", "redis://:pw1?pw2@host", "redis://:pw1#pw2@host",
    "redis://:pw1@pw2@host", "redis://user:pw1:pw2@host", "redis://:pw1/pw2@",
    "rediss://user:pw1/pw2@host:6380/0?ssl_cert_reqs=none", "unix://:pw1/pw2@/run/r.sock",
    "redis+sentinel://:pw1/pw2@s1:26379,s2/mymaster", "redis+cluster://:pw1?pw2@h1:7000",
    "redis+cluster://user:pw1/pw2@h1:7000,h2:7001", "redis://:pw1%40pw2@host",
    # passwords in the query
    "redis://host/0?password=pw1", "redis://host/0?x=1&PASSWORD=pw1&y=2",
    "rediss://u:pw1@h/0?ssl_password=pw2", "unix:///run/r.sock?password=pw1;pw2",
    "redis+sentinel://:pw1@s1/mymaster?sentinel_password=pw2",
    # case and scheme variants
    "REDIS://:pw1@host", "Rediss://:pw1@host", "redis+SENTINEL://:pw1@s1/master",
    "embedded://:pw1@/tmp/data",
]


def chain(error: BaseException) -> str:
    """The error's message and those of every exception it chains to."""
    texts = []
    seen: BaseException | None = error
    while seen is not None:
        texts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    return "\n".join(texts)


@pytest.mark.parametrize("url", URLS, ids=repr)
def test_mask_url_hides_every_part_of_the_password(url: str) -> None:
    masked = mask_url(url)
    assert not TOKENS.search(masked), masked
    assert "***" in masked


@pytest.mark.parametrize("url", [u for u in URLS if not u.lstrip().startswith("embedded")],
                         ids=repr)
def test_connect_never_shows_the_password_in_an_error_or_a_description(url: str) -> None:
    try:
        connection = connect(url)
    except (ConfigurationError, BrokerError) as exc:
        text = chain(exc)
        assert not TOKENS.search(text), text
        assert "***" in str(exc) or "url" in str(exc).lower()
    else:
        assert not TOKENS.search(connection.description), connection.description


def test_the_schemeless_url_of_the_issue_names_the_schemes_without_the_password() -> None:
    with pytest.raises(ConfigurationError) as caught:
        connect(":secret@127.0.0.1:6379")
    assert "secret" not in str(caught.value)
    assert "':***@127.0.0.1:6379'" in str(caught.value)
    assert "redis://" in str(caught.value)


def test_an_ambiguous_password_gets_advice_to_percent_encode_it() -> None:
    with pytest.raises(ConfigurationError) as caught:
        connect("redis://user:pw1/pw2@host:6379/0")
    assert "percent-encode" in str(caught.value)
    assert not TOKENS.search(chain(caught.value))


@pytest.mark.parametrize("url, masked", [
    ("localhost:6379", "localhost:6379"),
    ("redis://host:6379/0", "redis://host:6379/0"),
    ("redis://user@host:6379/0", "redis://user@host:6379/0"),
    ("redis://user:pw@host:6379/0", "redis://user:***@host:6379/0"),
    ("redis+sentinel://s1:26379,[::1]:26380,s3/mymaster", None),
    ("redis+cluster://[::1]:7000,[fe80::1],h3", None),
    ("unix:///run/redis.sock?db=1", None),
    ("embedded:///home/me/data", None),
], ids=repr)
def test_valid_urls_without_a_password_are_shown_as_they_are(url: str, masked: str) -> None:
    assert mask_url(url) == (masked or url)


def test_translate_masks_a_description_given_unmasked() -> None:
    error = translate(ConnectionError("refused"), "enqueue task 'x'", ":pw1@host:6379")
    assert isinstance(error, BrokerError) and not TOKENS.search(str(error))


_PIECES = st.sampled_from(["redis", "rediss", "unix", "redis+sentinel", "redis+cluster",
                           "http", "", ":", "/", "//", "://", "@", "?", "#", "&", "=", ",",
                           "[", "]", "%40", "host", "6379", "0", "user", "password=", " "])


@settings(max_examples=500, deadline=None, database=None)
@given(st.lists(_PIECES, max_size=5), st.lists(_PIECES, max_size=4),
       st.sampled_from(["://", ":", ":/", "", "//"]))
def test_a_password_between_a_colon_and_the_last_at_sign_is_always_hidden(
        before: List[str], after: List[str], separator: str) -> None:
    """Whatever surrounds ``:pw1@`` (the userinfo shape of every URL form), it is masked."""
    url = f"{''.join(before)}{separator}user:pw1@host{''.join(after).replace('@', '')}"
    assert "pw1" not in mask_url(url), (url, mask_url(url))


def test_a_short_password_is_scrubbed_from_errors_as_a_whole_word_only() -> None:
    with pytest.raises(ConfigurationError) as caught:
        connect("redis+cluster://:s@h1:notaport")
    assert "could not be cast to integer" in str(caught.value)
    assert "notaport" not in str(caught.value)


def test_an_at_sign_in_the_query_hides_too_much_rather_than_too_little() -> None:
    # "host:6379/0?client_name=me" could as well be "user:password" with an unencoded
    # "/" and "?": the display hides it; the connection itself uses the URL as given
    url = "redis://host:6379/0?client_name=me@box"
    assert mask_url(url) == "redis://host:***@box"
    assert connect(url).client.get_connection_kwargs()["client_name"] == "me@box"
