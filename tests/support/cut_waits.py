"""An app whose every WAIT the socket timeout cuts short: durability "replicated" on a
redis-server with no replica (WAIT 1 waits its whole timeout there), a socket timeout of
0.5 s under a durability_timeout of 3 s, and that socket timeout made unreadable (a
client that hides it), so that the check refusing the pair at configuration lets it by.
Each cut costs a send 0.5 s."""
from __future__ import annotations

from typing import Any, Tuple

import pytest

from minitask import Minitask
from minitask.broker import durability
from tests.support.servers import RedisServer


def wait_cut_app(redis_server: RedisServer, name: str,
                 monkeypatch: pytest.MonkeyPatch) -> Tuple[Minitask, Any]:
    """The app, and its task ``t`` (queue ``default``; any queue by ``queue=``)."""
    monkeypatch.setattr(durability, "socket_limit", lambda client: None)
    app = Minitask(name, broker=redis_server.url + "?socket_timeout=0.5",
                   durability="replicated", durability_timeout=3)

    @app.task(name="t")
    def t(value: str) -> str:
        return value

    return app, t
