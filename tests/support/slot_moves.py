"""A slot migration that takes its time, and a node down for a moment, on a real cluster.

``SlowMove`` sets one slot MIGRATING on its primary and IMPORTING on another node
(optionally moving its first key at once, so that the slot's keys are split
between the two) and finishes the move ``seconds`` later on a thread, as
``redis-cli --cluster reshard`` would: the rest of the keys, then CLUSTER SETSLOT
NODE on every node. ``seconds`` None: it never finishes (no key moved); ``close()``
sets the slot back as it was. ``down_for`` kills a node (SIGKILL) and starts it again on its port
and its nodes.conf a moment later: its clients' connections are refused meanwhile,
as in a failover.
"""
from __future__ import annotations

import threading
import time
from typing import Any, List, Optional

import redis

from tests.support.servers import RedisServer
from tests.support.topologies import Cluster


def _node(server: RedisServer) -> "redis.Redis":
    return server.client(socket_timeout=10, socket_connect_timeout=5)


class SlowMove:
    """The move of ``slot`` to another primary, begun now and finished ``seconds`` later."""

    def __init__(self, cluster: Cluster, slot: int, seconds: Optional[float],
                 split: bool = False) -> None:
        assert seconds is not None or not split, "a split move must finish"
        self.cluster, self.slot = cluster, slot
        self.source = cluster.owner_of_slot(slot)
        self.target = next(n for n in cluster.live_nodes() if n is not self.source)
        self.source_id = cluster.node_id(self.source)
        self.target_id = cluster.node_id(self.target)
        self.finished = threading.Event()
        self._errors: List[BaseException] = []
        with _node(self.source) as src, _node(self.target) as dst:
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self.source_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", self.target_id)
            keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1)
            if split and keys:
                self._migrate(src, keys)
        self._thread: Optional[threading.Thread] = None
        if seconds is not None:
            self._thread = threading.Thread(target=self._finish_after, args=(seconds,),
                                            daemon=True)
            self._thread.start()

    def _migrate(self, src: Any, keys: List[bytes]) -> None:
        src.execute_command("MIGRATE", "127.0.0.1", self.target.port, "", 0, 5000,
                            "KEYS", *keys)

    def _finish_after(self, seconds: float) -> None:
        try:
            time.sleep(seconds)
            with _node(self.source) as src, _node(self.target) as dst:
                while True:
                    keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, 100)
                    if not keys:
                        break
                    self._migrate(src, keys)
                dst.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.target_id)
                src.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.target_id)
            for node in self.cluster.live_nodes():
                if node not in (self.source, self.target):
                    with _node(node) as client:
                        client.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE",
                                               self.target_id)
            self.finished.set()
        except BaseException as exc:  # (said by close())
            self._errors.append(exc)

    def close(self) -> None:
        """Wait for the move to finish (one that never does: set back as it was)."""
        if self._thread is not None:
            self._thread.join(timeout=60)
        assert not self._errors, f"the slot's move failed: {self._errors!r}"
        if self._thread is None:
            with _node(self.source) as src, _node(self.target) as dst:
                for client in (dst, src):
                    client.execute_command("CLUSTER", "SETSLOT", self.slot, "STABLE")
        self.cluster.wait_until_stable()


def down_for(cluster: Cluster, node: RedisServer, seconds: float) -> threading.Thread:
    """Kill ``node`` now (SIGKILL) and start it again ``seconds`` later, on its port and
    with its nodes.conf (its slots, its id; its data gone): join the thread returned."""
    node.stop()

    def restart() -> None:
        time.sleep(seconds)
        node.start()
    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    return thread
