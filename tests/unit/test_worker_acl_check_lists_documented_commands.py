"""A worker's ACL check at start (worker/acl_start.py) asks about every command of the
documented ACL list but those the docs let a worker go without, and about nothing
else: the check's list and the docs' agree both ways. Where Redis cannot be asked
(6.2), the worker logs that once and starts."""
from __future__ import annotations

import contextlib
import logging
from typing import Any, List, Optional

import pytest

from minitask import Minitask
from minitask.broker.acl_check import (WORKER_OPTIONAL, SenderChecks, asked_args,
                                       worker_commands)
from minitask.errors import ConfigurationError
from minitask.worker.acl_start import require_worker_acl
from tests.support.acl import documented_commands
from tests.unit.test_acl_check_asks_documented_commands import _KEYS_BY_COUNT


@pytest.fixture
def app() -> Any:
    app = Minitask("aclworker", broker="redis://127.0.0.1:1/0")  # (never connects)
    try:
        yield app
    finally:
        app.close()


def test_the_worker_check_asks_about_the_documented_list_but_its_optional_commands(
        app: Minitask) -> None:
    asked = set(worker_commands(app.broker.transport.sources))
    documented = set(documented_commands())
    assert asked <= documented, sorted(asked - documented)
    assert documented - asked == {name for name in WORKER_OPTIONAL if name in documented}, \
        sorted(documented - asked)
    assert {"del", "hset", "ltrim", "evalsha", "script|load", "blpop", "xread"} <= asked


def test_each_command_is_asked_with_its_words_counted(app: Minitask) -> None:
    asked = worker_commands(app.broker.transport.sources)
    names, args = list(asked), asked_args(asked, "k")
    assert args[:2] == [1, "k"]
    words, index = [], 2
    while index < len(args):
        count = args[index]
        words.append(args[index + 1:index + 1 + count])
        index += 1 + count
    assert len(words) == len(names)
    for name, command in zip(names, words):
        assert command[:len(name.split("|"))] == name.split("|")
    assert ["script", "load", "return 1"] in words


class _Transport:
    description = "redis://u:***@h:1/0"

    def __init__(self, reply: Optional[List[int]], username: str = "u") -> None:
        self.reply = reply
        self.sources = {"ack": "redis.call('DEL', KEYS[1]) redis.call('HSET', KEYS[1])"}
        self.client = self
        self.acl_checks = SenderChecks(cluster=False)  # a plain server: one node
        self.connection_pool = type("Pool", (), {"connection_kwargs": {"username": username}})

    def evalsha(self, *args: Any) -> Optional[List[int]]:
        return self.reply

    def errors(self, what: str) -> Any:
        return contextlib.nullcontext()


class _Worker:
    name = "w1"
    queues = ["default"]

    def __init__(self, app: Minitask, reply: Optional[List[int]], username: str = "u") -> None:
        self.broker = type("B", (), {"transport": _Transport(reply, username),
                                     "queues": app.broker.queues})()


def test_a_redis_that_cannot_be_asked_is_said_once_and_the_worker_starts(
        app: Minitask, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        require_worker_acl(_Worker(app, None))
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1 and "could not check" in said[0] and "before 7.0" in said[0], said
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # the default user (no ACL set up): nothing said
        require_worker_acl(_Worker(app, None, username=""))
    assert not caplog.records


def test_a_missing_command_is_a_configuration_error_naming_its_rule(app: Minitask) -> None:
    names = list(worker_commands(_Transport(None).sources))
    with pytest.raises(ConfigurationError) as refused:
        require_worker_acl(_Worker(app, [names.index("hset") + 1]))
    said = str(refused.value)
    assert "worker w1 cannot start" in said and "HSET" in said and "+hset" in said, said
    assert "leased nothing" in said, said


def test_no_command_asked_with_the_key_everywhere_finds_its_keys_by_a_count(
        app: Minitask) -> None:
    """(Asked so, Redis could read their keys wrong.)"""
    asked = worker_commands(app.broker.transport.sources)
    everywhere = {name for name, words in asked.items() if set(words) == {""}}
    assert not everywhere & _KEYS_BY_COUNT
