"""A worker whose first call to Redis fails for another reason than its ACL user's
commands says the cause first (trial34: a broker URL's /99 began "could not ask Redis
which commands worker ...'s ACL user may run" and only then "DB index is out of
range"). A real redis-server, the worker in-process."""
from __future__ import annotations

import pytest

from minitask import BrokerError, Minitask
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_database_number_past_the_servers_is_said_first(redis_server: RedisServer) -> None:
    app = Minitask("db99", broker=f"redis://127.0.0.1:{redis_server.port}/99")
    try:
        worker = app.worker(burst=True, pool="thread")
        with pytest.raises(BrokerError) as raised:
            worker.run()
    finally:
        app.close()
    said = str(raised.value)
    assert said.startswith(f"worker {worker.name} cannot start: its first call to Redis "
                           f"failed (broker redis://127.0.0.1:{redis_server.port}/99): DB "
                           f"index is out of range; the broker URL's database number"), said
    assert "ACL" not in said and "which commands" not in said, said
