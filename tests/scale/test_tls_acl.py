"""TLS with a client certificate, and an ACL user allowed exactly the documented commands.

One redis-server speaks only TLS and requires a client certificate. The test
creates the user ``mt`` with the rules docs/guide/scaling.rst documents, and runs every
operation through it: in-process (enqueue, delay, retry, dead letters,
status, cancel, results) and with a real worker process (process pool, so
that forked children connect over TLS too). Redis's ACL log must stay empty:
nothing minitask sent was refused.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterator, List
from urllib.parse import quote

import pytest
from redis.exceptions import NoPermissionError

from minitask import BrokerError, Minitask, Retry, TaskFailed, current_task
from tests.support.acl import documented_acl
from tests.support.scale_kit import DEADLINE, ScaleKit
from tests.support.servers import RedisServer
from tests.support.topologies import Certificates, make_certificates, tls_server
from tests.support.waiting import wait_until

pytestmark = pytest.mark.scale

PASSWORD = "Pw-7f3e9c1b"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(autouse=True)
def fresh_acl_log(secure_server: RedisServer) -> None:
    with secure_server.client() as admin:
        admin.acl_log_reset()


@pytest.fixture(scope="module")
def secure_server(tmp_path_factory: pytest.TempPathFactory,
                  certificates: Certificates) -> Iterator[RedisServer]:
    server = tls_server(tmp_path_factory.mktemp("tls"), certificates)
    try:
        with server.client() as admin:
            admin.execute_command("ACL", "SETUSER", "mt", "reset", "on", f">{PASSWORD}",
                                  *documented_acl())
        yield server
    finally:
        server.stop()


def url_for(server: RedisServer, certs: Certificates, password: str = PASSWORD) -> str:
    query = "&".join(f"{name}={quote(str(path))}" for name, path in (
        ("ssl_ca_certs", certs.ca), ("ssl_certfile", certs.client_cert),
        ("ssl_keyfile", certs.client_key), ("ssl_cert_reqs", "required")))
    return f"rediss://mt:{password}@127.0.0.1:{server.port}/0?{query}"


def acl_denials(server: RedisServer) -> List[Dict[str, Any]]:
    """What Redis refused the user; redis-py's CLIENT SETINFO (7.2+) may be refused."""
    with server.client() as admin:
        return [entry for entry in admin.acl_log()
                if entry.get("username") == "mt" and entry.get("object") != "client|setinfo"]


def test_every_operation_runs_over_tls_as_an_acl_user_with_the_documented_commands(
        secure_server: RedisServer, certificates: Certificates,
        make_kit: Callable[..., ScaleKit]) -> None:
    url = url_for(secure_server, certificates)
    kit = make_kit(url, url)
    app = kit.app
    assert PASSWORD not in app.broker.description

    @app.task(name="add")
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="again", retries=1, retry_backoff=0.01)
    def again() -> str:
        if current_task().attempt == 1:  # type: ignore[union-attr]
            raise Retry(delay=0.05)
        return "second"

    @app.task(name="fails")
    def fails() -> None:
        raise ValueError("no")

    sums = [add.delay(i, 1) for i in range(5)]
    later = add.apply_in(0.2, 10, 10)
    retried = again.delay()
    dead = fails.delay()
    cancelled = add.apply_in(3600, 0, 0)
    assert cancelled.status() == "scheduled" and cancelled.cancel() is True
    assert app.broker.queues.counts(app.default_queue)["ready"] >= 5

    worker = app.worker()
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        assert [h.get(timeout=DEADLINE) for h in sums] == [1, 2, 3, 4, 5]
        assert later.get(timeout=DEADLINE) == 20
        assert retried.get(timeout=DEADLINE) == "second"
        with pytest.raises(TaskFailed):
            dead.get(timeout=DEADLINE)
        assert app.handle(dead.id).status() == "failed"
        assert [d.task_id for d in app.dead_letters()] == [dead.id]
        assert app.requeue_dead(dead.id) is True
        with pytest.raises(TaskFailed):
            dead.get(timeout=DEADLINE)
        wait_until(lambda: app.broker.registry.live(app.clock.now_ms(), 60_000), timeout=DEADLINE,
                   message="the worker's heartbeat")
    finally:
        worker.stop()
        runner.join(timeout=DEADLINE)
    assert app.purge_dead() == 1
    assert acl_denials(secure_server) == []


def test_worker_process_runs_over_tls_and_never_shows_the_password(
        secure_server: RedisServer, certificates: Certificates,
        make_kit: Callable[..., ScaleKit]) -> None:
    url = url_for(secure_server, certificates)
    kit = make_kit(url, url)
    names = [f"t{i}" for i in range(6)]
    for name in names:
        kit.enqueue("record", name, queue=kit.app.default_queue)
    kit.worker("--pool", "process", "-c", "2")
    kit.wait_all_done(names)
    kit.wait_for_worker()
    logs = kit.log_text()
    assert "mt:***@" in logs
    assert PASSWORD not in logs
    assert acl_denials(secure_server) == []


def test_a_wrong_password_is_a_broker_error_that_does_not_show_it(
        secure_server: RedisServer, certificates: Certificates) -> None:
    wrong = "Wrong-5d2a"
    app = Minitask("denied", broker=url_for(secure_server, certificates, wrong))

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    with pytest.raises(BrokerError) as error:
        add.delay(1, 2)
    assert wrong not in str(error.value) and "mt:***@" in str(error.value)
    app.close()


def test_the_acl_user_is_refused_what_minitask_does_not_need(
        secure_server: RedisServer) -> None:
    with secure_server.client(username="mt", password=PASSWORD) as client:
        with pytest.raises(NoPermissionError):
            client.flushall()
        with pytest.raises(NoPermissionError):
            client.append("minitask:x", "1")
        with pytest.raises(NoPermissionError):
            client.rpush("elsewhere", 1)
