"""A Redis keyspace as JSON, and back: how the golden layouts are kept and restored.

Every key is written as its type, its time to live (ms, or -1) and its value: a
string's bytes, a hash's or a stream entry's field/value pairs, a list's or a set's
members, a sorted set's members with their scores. Bytes that are UTF-8 are kept as
text, any others as ``{"base64": ...}``, so that the file reads and diffs well.
Restoring writes each key with plain commands, never DUMP/RESTORE, whose payload a
Redis of another major version refuses.
"""
from __future__ import annotations

import base64
from typing import Any, Dict, List, Union

import redis

Blob = Union[str, Dict[str, str]]


def _blob(data: bytes) -> Blob:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _bytes(blob: Blob) -> bytes:
    if isinstance(blob, str):
        return blob.encode("utf-8")
    return base64.b64decode(blob["base64"])


def _pairs(mapping: Dict[bytes, bytes]) -> List[List[Blob]]:
    return [[_blob(field), _blob(value)] for field, value in sorted(mapping.items())]


def dump(client: "redis.Redis[bytes]") -> Dict[str, Any]:
    """Every key of ``client``'s database, by name."""
    layout: Dict[str, Any] = {}
    for key in sorted(client.scan_iter(count=1000)):
        kind = client.type(key).decode()
        value: Any
        if kind == "string":
            value = _blob(client.get(key) or b"")
        elif kind == "hash":
            value = _pairs(client.hgetall(key))
        elif kind == "list":
            value = [_blob(item) for item in client.lrange(key, 0, -1)]
        elif kind == "set":
            value = [_blob(item) for item in sorted(client.smembers(key))]
        elif kind == "zset":
            value = [[_blob(member), score]
                     for member, score in client.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            value = [[entry.decode(), _pairs(fields)]
                     for entry, fields in client.xrange(key, "-", "+")]
        else:
            raise ValueError(f"key {key!r} is a {kind}: the golden layout keeps no such type")
        layout[_name(key)] = {"type": kind, "ttl_ms": client.pttl(key), "value": value}
    return layout


def _name(key: bytes) -> str:
    blob = _blob(key)
    if not isinstance(blob, str):
        raise ValueError(f"key {key!r} is not UTF-8")
    return blob


def load(client: "redis.Redis[bytes]", layout: Dict[str, Any]) -> None:
    """Write ``layout``'s keys into ``client``'s database (empty, as a test's is)."""
    for name, entry in layout.items():
        kind, value = entry["type"], entry["value"]
        if kind == "string":
            client.set(name, _bytes(value))
        elif kind == "hash":
            client.hset(name, mapping={_bytes(f): _bytes(v) for f, v in value})
        elif kind == "list":
            client.rpush(name, *[_bytes(item) for item in value])
        elif kind == "set":
            client.sadd(name, *[_bytes(item) for item in value])
        elif kind == "zset":
            client.zadd(name, {_bytes(member): score for member, score in value})
        elif kind == "stream":
            for entry_id, fields in value:
                client.xadd(name, {_bytes(f): _bytes(v) for f, v in fields}, id=entry_id)
        else:
            raise ValueError(f"golden key {name!r} has the unknown type {kind!r}")
        if entry["ttl_ms"] > 0:
            client.pexpire(name, entry["ttl_ms"])
