"""What the crash tests of an ACL changed while a real worker runs share (issue 29): an
admin client of the test's own redis-server, the URL of ACL user ``limited`` (every
command allowed until a test takes one away) and the test's app on the default user
(``as_limited``), and a worker process of an app of tests/apps (``worker_as``)."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Tuple

import redis

from minitask import Minitask
from tests.support.acl import user_without
from tests.support.processes import Processes
from tests.support.servers import RedisServer


@contextmanager
def as_limited(server: RedisServer, name: str
               ) -> Iterator[Tuple["redis.Redis[bytes]", str, Minitask]]:
    """An admin client of ``server``, the URL of ACL user ``limited``, and app ``name``
    on the default user; the app and the client closed after."""
    admin: "redis.Redis[bytes]" = server.client()
    url = user_without(admin, server, "nothing")
    app = Minitask(name, broker=server.client())
    try:
        yield admin, url, app
    finally:
        app.close()
        admin.close()


def worker_as(processes: Processes, module: str, url: str, log: Path, *options: str,
              pool: str = "thread", visibility: str = "3") -> Any:
    """A worker process of ``module`` (one slot of ``pool``, and ``options``) on ``url``,
    its visibility_timeout ``visibility`` s (TEST_VISIBILITY), writing ``log``."""
    return processes.worker(module, "--pool", pool, "-c", "1", *options, log=log,
                            env={"MINITASK_BROKER_URL": url, "TEST_VISIBILITY": visibility})
