"""The server's proto-max-bulk-len, read once as a worker starts, caps results too
(issue 29); Redis's default stands in when CONFIG is refused (an ACL, a managed Redis)."""
from __future__ import annotations

from typing import Any

import redis

from minitask.broker.health import DEFAULT_BULK_LIMIT, bulk_limit


class _Config:
    def __init__(self, reply: Any) -> None:
        self.reply = reply

    def config_get(self, name: str) -> Any:
        assert name == "proto-max-bulk-len"
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_the_servers_bulk_limit_is_read_from_config() -> None:
    assert bulk_limit(_Config({"proto-max-bulk-len": "1048576"})) == 1_048_576
    assert bulk_limit(_Config({b"proto-max-bulk-len": b"2000000"})) == 2_000_000


def test_redis_default_stands_in_when_the_server_cannot_be_asked() -> None:
    refused = redis.exceptions.NoPermissionError("this user has no permissions to run "
                                                 "the 'config|get' command")
    for reply in (refused, redis.ResponseError("unknown command 'CONFIG'"), {}, None,
                  {"proto-max-bulk-len": "lots"}, {"proto-max-bulk-len": "0"}):
        assert bulk_limit(_Config(reply)) == DEFAULT_BULK_LIMIT == 512 * 1024 * 1024
