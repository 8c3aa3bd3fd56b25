"""Every BrokerError says what failed and a hint that fits it, and descriptions of a
broker name the host really used.

Before, every BrokerError from the transport ended with "check that the server is
running and reachable", also for a full Redis, an ACL refusal or a script error;
and a URL with an unencoded '/' before its last '@' was shown with a host that the
client did not connect to.
"""
from __future__ import annotations

from typing import List

import pytest
import redis
from redis.exceptions import (AuthenticationError, BusyLoadingError, NoPermissionError,
                              OutOfMemoryError, ReadOnlyError, RedisClusterException,
                              ResponseError)

from minitask import BrokerError, ConfigurationError
from minitask.broker.connection import connect
from minitask.broker.refusals import broker_error, broker_reason

ENQUEUE_COMMANDS = ["hsetnx", "rpush", "zrangebyscore"]

#: (error as Redis 7, Redis 6.2 or fakeredis word it, script run, reason, words of the hint)
CASES = [
    (redis.ConnectionError("Error 111 connecting to h:6379. Connection refused."), None,
     "unreachable", ["running and reachable"]),
    (redis.TimeoutError("Timeout reading from socket"), "fetch", "unreachable",
     ["running and reachable"]),
    (ConnectionRefusedError(111, "Connection refused"), None, "unreachable",
     ["running and reachable"]),
    (BusyLoadingError("Redis is loading the dataset in memory"), None, "unreachable",
     ["running and reachable"]),
    (RedisClusterException("Redis Cluster cannot be connected."), None, "unreachable",
     ["running and reachable"]),
    (AuthenticationError("invalid username-password pair or user is disabled."), None, "auth",
     ["credentials", "percent-encode"]),
    (ResponseError("WRONGPASS invalid username-password pair"), None, "auth", ["credentials"]),
    (NoPermissionError("this user has no permissions to run the 'sadd' command"), None,
     "permission", ["SADD", "+sadd", "ACL list on the docs' Scaling out page"]),
    (NoPermissionError("this user has no permissions to run the 'zadd' command or its "
                       "subcommand"), None, "permission", ["+zadd"]),
    (NoPermissionError("this user has no permissions to access one of the keys used as "
                       "arguments"), "enqueue", "permission", ["~minitask:*"]),
    (ResponseError("The user executing the script can't run this command or subcommand "
                   "script: 0831e2c9, on @user_script:1."), "enqueue", "permission",
     ["enqueue.lua", "+hsetnx +rpush +zrangebyscore", "ACL list on the docs' Scaling out page"]),
    (ResponseError("Error running script (call to f_0831e2c9): @user_script:1: @user_script: "
                   "1: The user executing the script can't run this command or subcommand"),
     "enqueue", "permission", ["+hsetnx"]),
    (OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), None,
     "out of memory", ["maxmemory", "noeviction"]),
    (ResponseError("Error running script (call to f_1): @user_script:1: -OOM command not "
                   "allowed when used memory > 'maxmemory'."), "enqueue", "out of memory",
     ["maxmemory-policy noeviction"]),
    (ReadOnlyError("You can't write against a read only replica."), "enqueue", "read-only",
     ["replica", "primary", "redis+sentinel://"]),
    (ResponseError("READONLY You can't write against a read only replica. script: 1, on "
                   "@user_script:1."), "enqueue", "read-only", ["failover"]),
    (ResponseError("WRONGTYPE minitask key minitask:{a:q}:ready:5 holds another type than the "
                   "list minitask keeps there; nothing was changed script: 1, on "
                   "@user_script:9."), "enqueue", "script",
     ["script error in minitask's enqueue.lua", "rename or delete"]),
    (ResponseError("Error running script (call to f_1): @user_script:9: WRONGTYPE Operation "
                   "against a key holding the wrong kind of value"), "fetch", "script",
     ["fetch.lua"]),
    (ResponseError("Error running script (call to f_1): @user_script:?: [string \"<python>\"]"
                   ":5: attempt to compare nil with number"), "ack", "script", ["ack.lua"]),
    (ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), None,
     "wrong type", ["minitask:{app:queue}:*", "rename or delete"]),
    (ResponseError("ERR unknown command 'FOO'"), None, "error", []),
]


@pytest.mark.parametrize("exc, script, reason, words", CASES, ids=lambda v: repr(v)[:50])
def test_each_broker_error_carries_the_hint_that_fits_it(
        exc: BaseException, script: str, reason: str, words: List[str]) -> None:
    found, hint = broker_reason(exc, script, ENQUEUE_COMMANDS)
    assert found == reason
    for word in words:
        assert word in hint, hint
    if reason != "unreachable":
        assert "reachable" not in hint
    error = broker_error(exc, "enqueue into queue 'q'", "redis://:***@h:6379/0", script=script,
                         commands=ENQUEUE_COMMANDS)
    assert isinstance(error, BrokerError) and error.reason == reason
    assert str(error).startswith(f"could not enqueue into queue 'q' (broker "
                                 f"redis://:***@h:6379/0): {str(exc).rstrip('. ')}")


@pytest.mark.parametrize("url", [
    "redis://host:6379/0?client_name=me@box",
], ids=repr)
def test_a_url_whose_host_is_ambiguous_is_described_without_a_host_it_does_not_use(
        url: str) -> None:
    """The masked URL would show "host" (after the last '@'), a host the client does
    not use; the one it uses may be a piece of the password: neither is shown."""
    description = connect(url).description
    shown, _, note = description.partition(" (host hidden: ")
    assert shown == "redis://***"
    assert "percent-encode" in note and "%2F" in note


@pytest.mark.parametrize("url", [
    "redis://user:6380/x@host:6379/0",     # redis-py would connect to user:6380, db 0
    "redis://u:p@ss/x@host:6379/0",        # to ss:6379
], ids=repr)
def test_a_url_whose_db_path_is_a_piece_of_the_password_is_refused(url: str) -> None:
    """Read as redis-py reads it, the path after the first '/' is no db number (issue
    29, probe34 M4: refused by name): the error says how to write the URL, and shows
    no piece of it that may be the password."""
    with pytest.raises(ConfigurationError) as caught:
        connect(url)
    assert "percent-encode" in str(caught.value) and "%2F" in str(caught.value)
    assert "6380/x" not in str(caught.value) and "p@ss" not in str(caught.value)


@pytest.mark.parametrize("url, shown", [
    ("redis://:p@ss@host:6379/0", "redis://:***@host:6379/0"),  # urllib takes the last '@'
    ("redis://user:se@cret@db.internal:6380/2", "redis://user:***@db.internal:6380/2"),
    ("redis://db.internal:6379/0", "redis://db.internal:6379/0"),
], ids=repr)
def test_a_url_with_an_at_sign_in_its_password_names_the_host_really_used(
        url: str, shown: str) -> None:
    connection = connect(url)
    kwargs = connection.client.get_connection_kwargs()
    assert connection.description == shown
    assert f"@{kwargs['host']}:{kwargs['port']}/" in shown or shown.startswith(
        f"redis://{kwargs['host']}:{kwargs['port']}/")
