"""The ACL checks (broker/acl_check.py: before a client's first send, at a worker's
start, before an ops command writes) ask ``redis.acl_check_cmd`` about each command
with an argument count its arity allows (review 29n). A Redis with redis/redis#14847
(2026) checks the arity first and raises "Wrong number of args for
redis.acl_check_cmd()": each command asked with its key six times failed the whole
check, so every first send and every worker's start. Asked with fewer arguments than
it takes, Redis 7.0.15 crashed (a user with key patterns).

The counts are checked against the running server's COMMAND INFO; and the checks run,
through their own functions, on a real redis-server whose ``redis.acl_check_cmd``
checks the arity first as #14847's does (the check's script given a stand-in that
asks COMMAND INFO's arities, then the real one), for a user with key patterns.
"""
from __future__ import annotations

import asyncio
import hashlib
from typing import Dict, List

import pytest
import redis

import minitask.broker.acl_check as acl_check
from minitask import BrokerError, Minitask
from minitask.broker.acl_arguments import ARGUMENT_COUNTS
from minitask.broker.keys import queue_keys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import acl_user, has_acl_check
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

USER = "arity"


def _arity(admin: "redis.Redis[bytes]", words: List[str]) -> int:
    """The arity Redis checks ``words`` (a command and its arguments) against: its
    subcommand's where the command is a container and it names one, as Redis looks a
    command up, else the command's (COMMAND INFO)."""
    name = words[0].lower()
    info = admin.execute_command("COMMAND", "INFO", name)[name]
    if len(words) > 1:
        for sub in info.get("subcommands") or []:
            if sub[0].decode().lower() == f"{name}|{words[1].lower()}":
                return int(sub[1])
    return int(info["arity"])


def _fits(arity: int, argc: int) -> bool:
    """Whether ``argc`` words (the command's name counted) fit ``arity``."""
    return argc == arity if arity > 0 else argc >= -arity


def _asked_words() -> Dict[str, List[str]]:
    """Every command a check may ask about, with the words it is asked with: each of
    the table's, and those a worker sends itself."""
    asked = {name: [name, *("k" for _ in range(count))]
             for name, count in ARGUMENT_COUNTS.items()}
    for name, words in acl_check.WORKER_DIRECT.items():
        asked[name] = [*name.split("|"), *(word or "k" for word in words)]
    return asked


def test_every_command_is_asked_with_an_argument_count_its_arity_allows(
        admin: "redis.Redis[bytes]") -> None:
    """On the suite's redis-server (each of ``make test-redis``'s): COMMAND INFO."""
    outside = {name: (len(words), _arity(admin, words))
               for name, words in _asked_words().items()
               if not _fits(_arity(admin, words), len(words))}
    assert not outside, f"asked with (count, arity): {outside}"


#: A stand-in for redis.acl_check_cmd that checks the arity first, as Redis does since
#: redis/redis#14847; ARITY: the arities of COMMAND INFO ('script|load' a subcommand's).
_ARITY_FIRST = """\
local ARITY = {%s}
local function acl_check_cmd(name, ...)
  local argc = 1 + select('#', ...)
  local command = string.lower(name)
  if argc > 1 and ARITY[command .. '|' .. string.lower((...))] then
    command = command .. '|' .. string.lower((...))
  end
  local arity = ARITY[command]
  if arity == nil then
    error('no arity known to the test for ' .. command)
  end
  if (arity > 0 and argc ~= arity) or argc < -arity then
    error('Wrong number of args for redis.acl_check_cmd()')
  end
  return redis.acl_check_cmd(name, ...)
end
"""


def _arity_first(monkeypatch: pytest.MonkeyPatch, admin: "redis.Redis[bytes]") -> None:
    """Give each check's script (every ``*CHECK_SOURCE`` of acl_check.py) the stand-in
    that checks the arity first, with the arities of this server."""
    arities = {}
    for name, words in _asked_words().items():
        arities[name] = _arity(admin, words)
    table = ", ".join(f"[{name!r}] = {arity}" for name, arity in sorted(arities.items()))
    prelude = _ARITY_FIRST % table
    patched = 0
    for attribute in dir(acl_check):
        if attribute.endswith("CHECK_SOURCE"):
            original = getattr(acl_check, attribute)
            source = prelude + original.replace("redis.acl_check_cmd(", "acl_check_cmd(")
            monkeypatch.setattr(acl_check, attribute, source)
            monkeypatch.setattr(acl_check, attribute.replace("SOURCE", "SHA"),
                                hashlib.sha1(source.encode()).hexdigest())
            patched += 1
    assert patched


def _app(admin: "redis.Redis[bytes]", server: RedisServer, *rules: str) -> Minitask:
    """An app whose ACL user may run every command (but ``rules`` take some away) on
    minitask's keys alone: its key patterns are checked."""
    app = Minitask("arity", broker=acl_user(admin, server, USER, "~minitask:*", "&*",
                                            "+@all", *rules))
    app.task(name="add")(lambda x: x)
    return app


@pytest.fixture
def arity_first(monkeypatch: pytest.MonkeyPatch, admin: "redis.Redis[bytes]") -> None:
    if not has_acl_check(admin):
        pytest.skip("Redis 6.2 cannot be asked (redis.acl_check_cmd)")
    _arity_first(monkeypatch, admin)


@pytest.mark.usefixtures("arity_first")
def test_a_send_asks_a_redis_that_checks_arity_first_and_is_sent(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app = _app(admin, server)
    try:
        app.tasks["add"].apply_async((1,), task_id="a-1", delay=60)
        assert admin.zscore(queue_keys("arity", "default").delayed, "a-1") is not None
    finally:
        app.close()


@pytest.mark.usefixtures("arity_first")
def test_an_asyncio_send_asks_a_redis_that_checks_arity_first_and_is_sent(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app = _app(admin, server)

    async def send() -> None:
        try:
            await app.tasks["add"].aapply_async((1,), task_id="a-2")
        finally:
            await app.aclose()
    try:
        asyncio.run(send())
        assert admin.hexists(queue_keys("arity", "default").messages, "a-2")
    finally:
        app.close()


@pytest.mark.usefixtures("arity_first")
def test_a_refusal_is_still_told_by_a_redis_that_checks_arity_first(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app = _app(admin, server, "-hsetnx")
    try:
        with pytest.raises(BrokerError) as refused:
            app.tasks["add"].apply_async((1,), task_id="a-3", delay=60)
        said = str(refused.value)
        assert not refused.value.sent and "HSETNX" in said and "+hsetnx" in said, said
    finally:
        app.close()


@pytest.mark.usefixtures("arity_first")
def test_the_worker_and_ops_checks_ask_a_redis_that_checks_arity_first(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app = _app(admin, server, "-ltrim")
    transport = app.broker.transport
    key = queue_keys("arity", "default").messages
    try:
        assert acl_check.missing_for_worker(transport.client, transport.sources,
                                            key) == ["ltrim"]
        every_script = list(transport.sources)
        assert acl_check.missing_for_scripts(transport.client, transport.sources,
                                             every_script, key) == ["ltrim"]
        admin.execute_command("ACL", "SETUSER", USER, "+ltrim")
        assert acl_check.missing_for_worker(transport.client, transport.sources, key) == []
    finally:
        app.close()
