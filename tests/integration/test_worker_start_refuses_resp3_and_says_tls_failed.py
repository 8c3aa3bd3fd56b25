"""A broker URL or client speaking RESP3 (``protocol=3``) is refused as it is given,
naming the setting (probe 29q, item 3): before, it was accepted, and a worker's wait for
cancel requests could not read RESP3's map replies, logging an internal error every
second while ``cancel(running=True)`` stopped nothing. And a worker whose TLS handshake
fails at start says the connection failed (item 4), not that it could not ask Redis
which commands its ACL user may run. Real redis-servers, real worker processes.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio

from minitask import ConfigurationError, Minitask
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer
from tests.support.topologies import make_certificates, tls_server

pytestmark = pytest.mark.integration


def _worker(processes: Processes, url: str, log: Path) -> int:
    worker = processes.worker("tests.apps.acl_sends", "--pool", "thread", "-c", "1",
                              "--burst", env={"MINITASK_BROKER_URL": url}, log=log)
    return exit_code(worker)


def test_a_worker_on_a_resp3_url_does_not_start_and_says_why(
        redis_server: RedisServer, processes: Processes, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    url = f"redis://127.0.0.1:{redis_server.port}/0?protocol=3"
    assert _worker(processes, url, log) == 2, log.read_text()
    said = log.read_text()
    assert "protocol=3" in said and "RESP2" in said and "Traceback" not in said, said


def test_an_app_on_a_resp3_url_is_refused_before_sending(redis_server: RedisServer) -> None:
    app = Minitask("resp3", broker=f"redis://127.0.0.1:{redis_server.port}/0?protocol=3")
    add = app.task(name="add")(lambda x: x)
    try:
        with pytest.raises(ConfigurationError, match=r"protocol=3 \(RESP3\)"):
            add.delay(1)
    finally:
        app.close()
    with redis_server.client() as client:
        assert not client.keys("minitask:{resp3*")  # nothing sent


def test_a_resp3_async_broker_is_refused(redis_server: RedisServer) -> None:
    app = Minitask("resp3a", broker=redis_server.url, async_broker=redis.asyncio.Redis(
        host="127.0.0.1", port=redis_server.port, protocol=3))
    add = app.task(name="add")(lambda x: x)

    async def send() -> None:
        try:
            await add.aapply_async((1,))
        finally:
            await app.aclose()
    try:
        with pytest.raises(ConfigurationError, match="async_broker was made with protocol=3"):
            asyncio.run(send())
    finally:
        app.close()


def test_a_worker_whose_tls_handshake_fails_says_the_connection_failed(
        tmp_path: Path, processes: Processes) -> None:
    certs = make_certificates(tmp_path / "certs")
    server = tls_server(tmp_path / "tls", certs)
    try:
        log = tmp_path / "worker.log"
        # no CA certificate given: the server's (a throwaway CA's) cannot be verified
        url = f"rediss://127.0.0.1:{server.port}/0?ssl_cert_reqs=required"
        assert _worker(processes, url, log) != 0, log.read_text()
        said = log.read_text()
        assert "the TLS connection to Redis failed" in said, said
        assert "could not ask Redis which commands" not in said, said
    finally:
        server.stop()
