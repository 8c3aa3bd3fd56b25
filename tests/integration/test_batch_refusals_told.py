"""An ``app.batch()`` block's error told what Redis wrote where three send-error paths
meet (review29j): a refusal inside enqueue.lua after its write (ACL ``-del``) said
"sent=False, send the block again" though the tasks were in Redis (1); a registry
refused after the block's write said "may have been made" with ``enqueued_ids`` empty
(2); a block refused in part or whole with ``durability`` named the refused tasks as
written unconfirmed (3); a ``delay_many()`` chunk written unconfirmed, its registry
refused after, not in ``unconfirmed_ids`` (6).

On test-owned redis-servers: ACL users, planted keys, no replica (a WAIT falls short).
"""
from __future__ import annotations

from typing import Any, List

import pytest
import redis

from minitask import BatchNotSent, BrokerError, DurabilityError
from minitask.broker.keys import AppKeys, QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import allowed_only_for_the_check, refused_app, user_without
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "batchtold"


def test_a_refusal_inside_the_script_after_its_write_is_maybe_not_unsent(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, add, other = refused_app(APP, user_without(admin, server, "nothing"))
    handles: List[Any] = []
    try:
        add.delay(0)  # the ACL check of the first send passes: DEL is refused only after it
        admin.execute_command("ACL", "SETUSER", "limited", "-del")
        with pytest.raises(BrokerError) as refused:
            with app.batch():
                handles += [add.delay(1), add.delay(2), other.delay(3)]
        error, said = refused.value, str(refused.value)
        ids = [handle.id for handle in handles]
        assert error.sent, said  # written (in part perhaps): a resend could run them twice
        assert sorted(error.task_ids) == sorted(ids), said
        assert error.unsent_ids == [] and error.enqueued_ids == [], said
        assert "send the block again" not in said and "may have been enqueued" in said, said
        assert error.part_way and "is queued once" in said, said  # its task_id= mends
        # what the scripts wrote before DEL was refused: in Redis, its handle answers
        written = [task_id for task_id in ids
                   if admin.hexists(QueueKeys(APP, "default").messages, task_id)
                   or admin.hexists(QueueKeys(APP, "other").messages, task_id)]
        assert written, "the scripts wrote nothing: no refusal after a write to test"
        for handle in handles:
            handle.status()  # never BatchNotSent: each may be in Redis
        assert {handles[0].id, handles[2].id} <= set(written)
        # both queues listed, findable by id
        assert {b"default", b"other"} <= admin.smembers(AppKeys(APP).queues)
    finally:
        app.close()


def test_a_registry_refused_after_the_block_was_written_says_it_was_made(
        server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    allowed_only_for_the_check(monkeypatch, admin, "limited", "sadd")
    app, add, _ = refused_app(APP, user_without(admin, server, "sadd"))
    handles: List[Any] = []
    try:
        with pytest.raises(BrokerError) as refused:
            with app.batch():
                handles += [add.delay(i) for i in range(3)]
        error, said = refused.value, str(refused.value)
        ids = [handle.id for handle in handles]
        assert error.sent and error.written, said
        assert error.enqueued_ids == ids and error.task_ids == ids, said
        assert "was made" in said and "may have been made" not in said, said
        assert [handle.status() for handle in handles] == ["queued"] * 3
    finally:
        app.close()


def test_a_block_refused_in_part_names_unconfirmed_only_what_was_written(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, add, other = refused_app(APP, server.url, durability="replicated",
                                  durability_timeout=0.2)
    admin.set(QueueKeys(APP, "other").messages, "planted")
    handles: List[Any] = []
    try:
        with pytest.raises(BrokerError) as refused:
            with app.batch():
                handles += [add.delay(1), other.delay(2)]
        error, said = refused.value, str(refused.value)
        assert not isinstance(error, DurabilityError), said
        assert error.enqueued_ids == [handles[0].id], said
        assert error.unsent_ids == [handles[1].id], said
        assert error.unconfirmed_ids == [handles[0].id], said  # never the refused one
        assert "not confirmed" in said, said
        with pytest.raises(BatchNotSent):
            handles[1].status()
    finally:
        app.close()


def test_a_block_refused_whole_says_nothing_unconfirmed(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, add, _ = refused_app(APP, server.url, durability="replicated",
                              durability_timeout=0.2)
    admin.set(QueueKeys(APP, "default").messages, "planted")
    handles: List[Any] = []
    try:
        with pytest.raises(BrokerError) as refused:
            with app.batch():
                handles.append(add.delay(1))
        error, said = refused.value, str(refused.value)
        assert not error.sent and error.unsent_ids == [handles[0].id], said
        assert error.unconfirmed_ids == [], said
        assert "besides" not in said and "not confirmed" not in said, said
    finally:
        app.close()


def test_a_chunk_written_unconfirmed_then_its_registry_refused_is_named_unconfirmed(
        server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    allowed_only_for_the_check(monkeypatch, admin, "limited", "sadd")
    app, add, _ = refused_app(APP, user_without(admin, server, "sadd"),
                              durability="replicated", durability_timeout=0.2)
    try:
        with pytest.raises(BrokerError) as refused:
            add.delay_many([((i,), {}) for i in range(3)])
        error, said = refused.value, str(refused.value)
        assert error.sent and len(error.enqueued_ids) == 3, said
        assert error.unconfirmed_ids == error.enqueued_ids, said
        assert "not confirmed" in said, said
    finally:
        app.close()
