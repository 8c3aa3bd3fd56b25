"""A BrokerError of a script's refusal carries no sha nor line of Redis's (probe 29h,
M1): Redis 7 appends "script: <sha>, on @user_script:<line>.", 6.2 wraps the error in
"Error running script (call to f_<sha>): @user_script:<line>: "; the reason is told
from them all the same."""
from __future__ import annotations

import redis

from minitask.broker.refusals import broker_error

SHA = "33c4c2d1b6b35e0f1a2b3c4d5e6f708192a3b4c5"
SAID = ("WRONGTYPE minitask key minitask:{a:q}:ready:3 holds another type than the list "
        "minitask keeps there; nothing was changed")


def test_redis_7s_script_mark_is_left_out() -> None:
    error = broker_error(redis.ResponseError(f"{SAID} script: {SHA}, on @user_script:35."),
                         "requeue dead task x", "redis://h:1/0", script="revive")
    assert error.reason == "script"
    assert str(error).startswith(f"could not requeue dead task x (broker redis://h:1/0): "
                                 f"{SAID}; a script error in minitask's revive.lua")
    assert SHA not in str(error) and "user_script" not in str(error)


def test_redis_6s_script_wrapper_is_left_out() -> None:
    error = broker_error(redis.ResponseError(
        f"Error running script (call to f_{SHA}): @user_script:35: {SAID}"),
        "requeue dead task x", "redis://h:1/0", script="revive")
    assert error.reason == "script"
    assert f"(broker redis://h:1/0): {SAID}; " in str(error)
    assert SHA not in str(error) and "user_script" not in str(error)


def test_an_error_of_no_script_is_said_as_it_is() -> None:
    text = "WRONGTYPE Operation against a key holding the wrong kind of value"
    error = broker_error(redis.ResponseError(text), "read x", "redis://h:1/0")
    assert f"): {text}; " in str(error)
