"""What the crash tests of an ACL changed while a real worker runs share (issue 29): an
admin client of the test's own redis-server, the URL of ACL user ``limited`` (every
command allowed until a test takes one away) and the test's app on the default user
(``as_limited``), or the client and the app alone on a Redis whose ACL can be asked
(``acl_checked``), and a worker process of an app of tests/apps (``worker_as``)."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional, Tuple

import pytest
import redis

from minitask import Minitask
from tests.support.acl import has_acl_check, user_without
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


@contextmanager
def acl_checked(server: RedisServer, name: str
                ) -> Iterator[Tuple["redis.Redis[bytes]", Minitask]]:
    """An admin client of ``server`` and app ``name`` on the default user, both closed
    after; the test skipped on a Redis whose ACL cannot be asked (before 7.0)."""
    admin: "redis.Redis[bytes]" = server.client()
    try:
        if not has_acl_check(admin):
            pytest.skip("Redis before 7.0 cannot be asked (redis.acl_check_cmd)")
        app = Minitask(name, broker=server.client())
        try:
            yield admin, app
        finally:
            app.close()
    finally:
        admin.close()


def worker_as(processes: Processes, module: str, url: str, log: Path, *options: str,
              pool: str = "thread", visibility: Optional[str] = "3", slots: int = 1) -> Any:
    """A worker process of ``module`` (``slots`` slots of ``pool``, and ``options``) on
    ``url``, its visibility_timeout ``visibility`` s (TEST_VISIBILITY; None: the app's
    own), writing ``log``."""
    env = {"MINITASK_BROKER_URL": url}
    if visibility is not None:
        env["TEST_VISIBILITY"] = visibility
    return processes.worker(module, "--pool", pool, "-c", str(slots), *options, log=log,
                            env=env)
