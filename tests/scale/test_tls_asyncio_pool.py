"""A broker given as ``redis.Redis(ssl=True, ssl_ca_certs=...)``: the asyncio pool's
loop opens its own connections over TLS and records outcomes on them, and async
producers send. redis-py's blocking connections take TLS arguments its asyncio ones
refuse (OCSP's): copied over whole, every loop connection failed to open (the
recording threads took each outcome after it, the loop resting a second each time)
and the async producers' client failed on its first call. A setting that cannot be
carried over and is set (OCSP validation) is refused, not silently dropped."""
from __future__ import annotations

import asyncio
import importlib
import signal
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
import redis

from minitask import ConfigurationError, Minitask
from minitask.broker.keys import queue_keys
from minitask.worker import loop_acks
from tests.support.processes import Processes, exit_code, send
from tests.support.servers import RedisServer
from tests.support.topologies import Certificates, make_certificates, tls_server

pytestmark = pytest.mark.scale

TASKS = 200
DEADLINE = 120.0


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secure_server(tmp_path_factory: pytest.TempPathFactory,
                  certificates: Certificates) -> Iterator[RedisServer]:
    server = tls_server(tmp_path_factory.mktemp("tls"), certificates)
    try:
        yield server
    finally:
        server.stop()


def tls_env(server: RedisServer, certs: Certificates) -> Dict[str, str]:
    return {"TEST_TLS_PORT": str(server.port), "TEST_TLS_CA": str(certs.ca),
            "TEST_TLS_CERT": str(certs.client_cert), "TEST_TLS_KEY": str(certs.client_key)}


def loop_connections(admin: "redis.Redis[bytes]") -> List[Dict[str, str]]:
    """The worker's asyncio loop's connections, having sent ack_fetch.lua (EVALSHA):
    RESP2, where redis-py's blocking clients speak RESP3 (redis-py 8's default; with
    one that speaks RESP2 too, any connection that sent EVALSHA)."""
    apart = admin.client_info().get("resp") != "2"
    return [client for client in admin.client_list() if client.get("cmd") == "evalsha"
            and (client.get("resp") == "2" or not apart)]


@pytest.mark.timeout(300)
def test_a_real_asyncio_worker_records_on_its_loops_tls_connections_and_async_producers_send(
        secure_server: RedisServer, certificates: Certificates, processes: Processes,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tls_env(secure_server, certificates)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    tls_aio = importlib.import_module("tests.apps.tls_aio")  # (its broker from the env)
    app = tls_aio.app
    admin = secure_server.client()
    log = tmp_path / "worker.log"
    try:
        async def produce() -> List[object]:  # the async producers' client, over TLS
            return [await tls_aio.double.adelay(index) for index in range(TASKS)]

        handles = asyncio.run(produce())
        worker = processes.worker("tests.apps.tls_aio", "--pool", "asyncio", "-c", "4",
                                  "--loglevel", "debug", env=env, log=log)
        deadline = time.monotonic() + DEADLINE
        seen: List[Dict[str, str]] = []
        keys = queue_keys("tlsaio", "default")
        while not seen or sum(admin.llen(ready) for ready in keys.ready) or admin.zcard(
                keys.leases):
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            seen = seen or loop_connections(admin)
            time.sleep(0.01)
        results = [handle.get(timeout=DEADLINE) for handle in handles]  # type: ignore
        send(worker, signal.SIGTERM)
        assert exit_code(worker) == 0, log.read_text()
    finally:
        admin.close()
        app.close()
    assert results == [2 * index for index in range(TASKS)]
    assert seen, "the loop never opened a connection of its own"
    failed = [line for line in log.read_text().splitlines()
              if "could not" in line and "NOSCRIPT" not in line]  # (loaded as it goes)
    assert not failed, failed  # no round trip of the loop failed


def test_a_tls_setting_the_asyncio_connections_lack_is_refused_not_dropped(
        caplog: pytest.LogCaptureFixture) -> None:
    client = redis.Redis(host="127.0.0.1", port=1, ssl=True, ssl_validate_ocsp=True)
    if "ssl_validate_ocsp" not in client.connection_pool.connection_kwargs:
        pytest.skip("this redis-py has no OCSP validation")
    app = Minitask("ocsp", broker=client)
    try:
        async def produce() -> None:
            app.async_broker()

        with pytest.raises(ConfigurationError, match="ssl_validate_ocsp"):
            asyncio.run(produce())
        host = type("H", (), {"broker": app.broker})()
        assert loop_acks.link_for(host) is None  # the recording threads, on the client as set
    finally:
        app.close()
    assert "ssl_validate_ocsp" in caplog.text
