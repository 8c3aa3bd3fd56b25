"""A runtime error of the fetch script (a value in one queue's keys it could not read)
sets that queue aside, like a key of another type: each fetch script reads the keys
of one queue only, so the error is that queue's, and the worker's other queues are
served meanwhile. Before, only WRONGTYPE and "minitask key" did: any other script
error took the whole-server outage path, every queue of the worker backing off.
A refusal of the whole server stays an outage, raised in a script or not."""
from __future__ import annotations

from typing import List

import pytest
from redis.exceptions import BusyLoadingError, NoPermissionError, ResponseError

from minitask.broker.refusals import broker_error
from minitask.worker.outages import QueueRefusals

#: A fetch script's runtime errors, as Redis 7 and 6.2 word them.
SCRIPT_ERRORS = [
    "ERR user_script:57: attempt to compare nil with number script: 3f1c0a2e, on "
    "@user_script:57.",
    "ERR user_script:12: bad argument #1 to 'sub' (string expected, got nil) script: 3f1c, "
    "on @user_script:12.",
    "Error running script (call to f_3f1c0a2e): @user_script:57: user_script:57: attempt to "
    "perform arithmetic on a nil value",
    "Error running script (call to f_1): @user_script:?: [string \"<python>\"]:5: attempt "
    "to index a boolean value",
    "ERR Error running script (call to f_1): @user_script:3: Script attempted to access a "
    "non local key in a cluster node",
]

#: Refusals of the whole server (or of the worker's user), raised in the fetch script or
#: not: ridden out with backoff, every queue alike.
SERVER_REFUSALS: List[BaseException] = [
    ResponseError("NOREPLICAS Not enough good replicas to write. script: 3f1c, on "
                  "@user_script:40."),
    ResponseError("MISCONF Redis is configured to save RDB snapshots, but it's currently "
                  "unable to persist to disk. script: 3f1c, on @user_script:40."),
    ResponseError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set "
                  "to 'no'."),
    ResponseError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or "
                  "SHUTDOWN NOSAVE."),
    ResponseError("The user executing the script can't run this command or subcommand "
                  "script: 3f1c, on @user_script:1."),
    NoPermissionError("this user has no permissions to access one of the keys used as "
                      "arguments"),
    ResponseError("Error running script (call to f_1): @user_script:1: -OOM command not "
                  "allowed when used memory > 'maxmemory'."),
    ResponseError("READONLY You can't write against a read only replica. script: 1, on "
                  "@user_script:1."),
    # Lua's allocator refused: the server's memory, no key's (review 13)
    ResponseError("ERR user_script:1: not enough memory script: 3f1c, on @user_script:1."),
    BusyLoadingError("Redis is loading the dataset in memory"),
    ConnectionError("Connection refused"),
]


def _fetch_error(exc: BaseException):  # type: ignore[no-untyped-def]
    return broker_error(exc, "fetch from queue 'a'", "redis://h:6379/0", script="fetch",
                        commands=["zadd", "hget"])


@pytest.mark.parametrize("text", SCRIPT_ERRORS, ids=lambda text: text[:40])
def test_a_fetch_scripts_runtime_error_sets_its_queue_aside(text: str) -> None:
    error = _fetch_error(ResponseError(text))
    assert error.reason == "script"
    assert QueueRefusals.refusal(error)


@pytest.mark.parametrize("exc", SERVER_REFUSALS, ids=lambda exc: str(exc)[:30])
def test_a_refusal_of_the_whole_server_stays_an_outage(exc: BaseException) -> None:
    error = _fetch_error(exc)
    assert error.reason != "script", error
    assert not QueueRefusals.refusal(error)


def test_a_key_of_another_type_still_sets_its_queue_aside() -> None:
    assert QueueRefusals.refusal(_fetch_error(ResponseError(
        "WRONGTYPE Operation against a key holding the wrong kind of value")))
    assert QueueRefusals.refusal(_fetch_error(ResponseError(
        "WRONGTYPE minitask key minitask:{a:q}:leases holds another type than the zset "
        "minitask keeps there; nothing was changed script: 1, on @user_script:9.")))
