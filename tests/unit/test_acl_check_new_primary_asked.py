"""On Redis Cluster, a node made primary after every primary passed the sender's ACL
check (a failover, a slot moved to a new node) is asked before a send goes to it
(issue 29, LOW). Before, the check was skipped for good once every primary had
passed (``acl_unchecked`` False) and by hash slot (a slot that passed asked nothing
more, whichever node served it): the new primary, whose ACL is its own, was never
asked. Now the client's layout changing (redis-py's ``NodesManager.initialize`` or
``move_slot``) makes the next send look up its nodes again, by their identity.

A fake node map (a real failover takes the cluster's node timeout and more); the
transport's hot path as it is: ``check_sender`` while ``acl_unchecked``."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest

from minitask.broker import acl_check
from minitask.broker.acl_check import SenderChecks, check_sender, watch_layout


class _Node:
    def __init__(self, name: str) -> None:
        self.name = name


class _Manager:
    """redis-py's NodesManager as far as the check uses it."""

    def __init__(self) -> None:
        self.read = 0

    def initialize(self) -> None:
        self.read += 1

    def move_slot(self, error: Any) -> None:
        self.read += 1


class _Cluster:
    def __init__(self, owners: Dict[str, str]) -> None:
        self.owners = owners  # key -> its primary's name
        self.nodes_manager = _Manager()

    def get_node_from_key(self, key: str) -> _Node:
        return _Node(self.owners[key])

    def get_primaries(self) -> List[_Node]:
        return [_Node(name) for name in sorted(set(self.owners.values()))]


class _Owner:
    """A transport as acl_check.py sees it."""

    def __init__(self, client: _Cluster) -> None:
        self.client = client
        self.acl_unchecked = True
        self.acl_checks = SenderChecks(True)
        watch_layout(self)

    def send(self, key: str) -> None:
        if self.acl_unchecked:  # (transport.run_calls's hot path)
            check_sender(self, [("enqueue", "", (key,), (), 0)], "send a task")


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """The nodes asked (require_commands's), in order."""
    nodes: List[str] = []

    def ask(owner: Any, keys: List[str], what: str) -> None:
        nodes.extend(acl_check.node_of(owner, key) for key in keys)
    monkeypatch.setattr(acl_check, "require_commands", ask)
    return nodes


@pytest.mark.parametrize("how", ["failover", "initialize"])
def test_a_node_made_primary_later_is_asked_before_a_send_to_it(
        asked: List[str], how: str) -> None:
    cluster = _Cluster({"minitask:{a:q1}:x": "10.0.0.1:7000", "minitask:{a:q2}:x": "10.0.0.2:7000"})
    owner = _Owner(cluster)
    owner.send("minitask:{a:q1}:x")
    owner.send("minitask:{a:q2}:x")
    assert asked == ["10.0.0.1:7000", "10.0.0.2:7000"]
    assert not owner.acl_unchecked  # every primary passed: a send asks nothing
    owner.send("minitask:{a:q1}:x")
    assert len(asked) == 2
    # the replica 10.0.0.3 takes over q1's slot; redis-py learns it
    cluster.owners["minitask:{a:q1}:x"] = "10.0.0.3:7000"
    if how == "failover":
        cluster.nodes_manager.move_slot(object())
    else:
        cluster.nodes_manager.initialize()
    assert cluster.nodes_manager.read == 1  # (redis-py's own still ran)
    owner.send("minitask:{a:q1}:x")
    assert asked == ["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"]
    owner.send("minitask:{a:q2}:x")  # a node that passed is not asked again
    owner.send("minitask:{a:q1}:x")
    assert len(asked) == 3
