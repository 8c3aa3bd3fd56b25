"""Before a worker leases anything: may its Redis ACL user run every command it needs?

Redis checks a script's commands one at a time, as the script comes to each: a user
without one that an ack, a retry or a workflow's next step calls after its first write
had the worker leave tasks half done (acked, their results not stored; a step
finished, the next never sent), or refused over and over (issue 29). So a worker asks
Redis once as it starts (7.0 and later: ``redis.acl_check_cmd``) about every command
of its scripts and those it sends itself (``broker.acl_check.worker_commands``), and
one whose user lacks any does not start: a configuration error naming them and the
``+rules`` to add. Redis 6.2 cannot be asked: a worker logging in as an ACL user says
so once, and starts (one on the default user, as the embedded broker's, says nothing).
"""
from __future__ import annotations

import ssl
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from ..broker.acl_check import check_nodes, missing_for_worker, worker_refused
from ..broker.refusals import broker_reason
from ..errors import BrokerError, ConfigurationError
from ..printable import own_logger

logger = own_logger(__name__)

#: What a worker on a Redis that cannot be asked logs, once, as it starts.
UNCHECKED = ("worker %s could not check that its Redis ACL user may run every command "
             "it needs: Redis before 7.0 has no redis.acl_check_cmd; starting anyway. A "
             "user missing one of the ACL list of the docs' Scaling out page "
             "(guide/scaling) has a worker's script refused as it comes to that command, "
             "which can leave a task half done: check the user against that list")


def require_worker_acl(worker: Any) -> None:
    """Refuse to start (ConfigurationError) when the ACL user lacks a command the worker
    needs; log UNCHECKED where Redis cannot say. On Redis Cluster every primary node
    the worker writes to is asked (ACLs are each node's own): those of its queues (a
    queue's keys share its hash tag) and that of the app-wide keys (its heartbeat, the
    queue registry, the metrics)."""
    transport = worker.broker.transport
    queues = worker.broker.queues
    keys = [queues.keys(queue).messages for queue in worker.queues]

    @contextmanager
    def errors(key: str, node: str) -> Iterator[None]:
        try:
            with transport.errors(f"ask Redis which commands worker {worker.name}'s ACL "
                                  f"user may run (key {key!r}"
                                  f"{f', node {node}' if node else ''})"):
                yield
        except BrokerError as error:
            if error.reason == "permission":  # about the ACL: worded so
                raise ConfigurationError(f"worker {worker.name} cannot start: {error}") \
                    from None
            if error.reason == "script":
                raise  # (the check's own script: "could not ask ...", as it says)
            raise first_call_failed(error, worker.name, transport.description,
                                    node) from error.__cause__

    def refuse(missing: Sequence[str], key: str, node: str) -> Exception:
        return ConfigurationError(worker_refused(missing, key, worker.name,
                                                 transport.description, node))
    asked = check_nodes(transport, [*keys, queues.app_keys.workers],
                        lambda key: missing_for_worker(transport.client, transport.sources,
                                                       key), refuse, errors)
    if not asked and logs_in_as_a_user(transport.client):
        logger.warning(UNCHECKED, worker.name)  # Redis before 7.0: no node can say


def first_call_failed(error: BrokerError, worker: str, broker: str,
                      node: str) -> BrokerError:
    """The error of a worker whose first call to Redis (its ACL check) failed for
    another reason than the ACL: the cause, said first (a connection or TLS handshake
    that failed, credentials refused, a database number past the server's), not the
    check, which it has nothing to do with."""
    cause = error.__cause__ or error
    where = f"broker {broker}, node {node}" if node else f"broker {broker}"
    said = str(cause).rstrip(". ")  # redis-py ends its own with "." (not ".;")
    if error.reason != "unreachable":
        hint = broker_reason(cause)[1] if error.__cause__ else ""
        return BrokerError(f"worker {worker} cannot start: its first call to Redis failed "
                           f"({where}): {said}{f'; {hint}' if hint else ''}",
                           reason=error.reason)
    tls = isinstance(cause, ssl.SSLError) or any(
        word in str(cause) for word in ("SSL", "certificate", "TLS"))
    check = ("check the TLS settings: the CA certificate (ssl_ca_certs), the client "
             "certificate and key, the host name the server's certificate names"
             if tls else broker_reason(cause)[1] or "is Redis running and reachable?")
    return BrokerError(f"worker {worker} cannot start: the {'TLS ' if tls else ''}"
                       f"connection to Redis failed ({where}): {said}; {check}",
                       reason="unreachable")


def logs_in_as_a_user(client: Any) -> bool:
    """Whether ``client`` logs in as a named ACL user (a URL's ``user:password@``),
    not as Redis's default user."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:  # Redis Cluster: its nodes'
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", {})
    return bool(kwargs.get("username"))
