"""msgpack <-> Message and Outcome, inside a versioned envelope.

Every value is checked before packing so that an unsupported one is
reported with its path (``args[1]['when']``) and nothing reaches Redis.
"""
from __future__ import annotations

import datetime as _dt
from typing import Any, Dict

import msgpack  # type: ignore[import-untyped]

from .errors import DecodeError, EncodeError
from .message import ENVELOPE_VERSION, Message, Outcome

_INT_MIN = -(2 ** 63)
_INT_MAX = 2 ** 63 - 1
_SCALARS = (str, bytes, float, bool, type(None))


def check_value(value: Any, path: str, task_name: str) -> None:
    """Raise EncodeError unless ``value`` is made only of supported types."""
    if isinstance(value, _SCALARS):
        return
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise EncodeError(
                f"task {task_name!r}: cannot send {value!r} at {path}: integers must fit "
                f"in signed 64 bits; send it as a str", task_name=task_name, path=path)
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_value(item, f"{path}[{index}]", task_name)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, (list, tuple, dict)):  # msgpack would decode it unhashable
                raise EncodeError(f"task {task_name!r}: cannot send dict key {key!r} at {path}: "
                                  f"keys must be scalars; convert it to a str",
                                  task_name=task_name, path=f"{path} key {key!r}")
            check_value(key, f"{path} key {key!r}", task_name)
            check_value(item, f"{path}[{key!r}]", task_name)
        return
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise EncodeError(
                f"task {task_name!r}: cannot send naive datetime {value!r} at {path}: its "
                f"time zone is unknown; attach one, e.g. .replace(tzinfo=timezone.utc)",
                task_name=task_name, path=path)
        return
    raise EncodeError(
        f"task {task_name!r}: cannot send {value!r} at {path}: {type(value).__name__} is "
        f"not a msgpack type (None, bool, int, float, str, bytes, list, tuple, dict, "
        f"aware datetime); convert it first", task_name=task_name, path=path)


def check_arguments(task_name: str, args: Any, kwargs: Dict[str, Any]) -> None:
    for index, item in enumerate(args):
        check_value(item, f"args[{index}]", task_name)
    for key, item in kwargs.items():
        check_value(item, f"kwargs[{key!r}]", task_name)


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True, datetime=True)  # type: ignore[no-any-return]


def _unpack(data: bytes, what: str) -> Dict[str, Any]:
    try:
        obj = msgpack.unpackb(data, raw=False, timestamp=3, strict_map_key=False)
    except Exception as exc:  # msgpack raises many unrelated types for corrupt input
        raise DecodeError(f"cannot decode {what}: {exc}") from exc
    if not isinstance(obj, dict):
        raise DecodeError(f"cannot decode {what}: expected a map, got {type(obj).__name__}")
    version = obj.get("v")
    if version != ENVELOPE_VERSION:
        raise DecodeError(f"cannot decode {what}: unknown envelope version {version!r} "
                          f"(this minitask reads version {ENVELOPE_VERSION})")
    return obj


def encode_message(message: Message) -> bytes:
    """Pack a message whose arguments were already checked by ``check_arguments``."""
    return _pack({
        "v": ENVELOPE_VERSION,
        "id": message.id,
        "task": message.task,
        "args": message.args,
        "kwargs": message.kwargs,
        "queue": message.queue,
        "priority": message.priority,
        "enqueued_at_ms": message.enqueued_at_ms,
        "eta_ms": message.eta_ms,
        "attempt": message.attempt,
    })


def decode_message(data: bytes) -> Message:
    obj = _unpack(data, "message")
    try:
        message = Message(
            id=obj["id"], task=obj["task"], args=list(obj["args"]), kwargs=dict(obj["kwargs"]),
            queue=obj["queue"], priority=int(obj["priority"]),
            enqueued_at_ms=int(obj["enqueued_at_ms"]), eta_ms=obj.get("eta_ms"),
            attempt=int(obj.get("attempt", 1)))
    except (KeyError, TypeError, ValueError) as exc:
        raise DecodeError(f"cannot decode message: missing or invalid field {exc}") from exc
    if not isinstance(message.id, str) or not isinstance(message.task, str):
        raise DecodeError("cannot decode message: id and task must be strings")
    return message


def encode_outcome(outcome: Outcome, *, task_name: str = "?") -> bytes:
    """Pack an outcome; raises EncodeError when a task's return value is unsupported."""
    if outcome.value is not None:
        check_value(outcome.value, "return value", task_name)
    return _pack({
        "v": ENVELOPE_VERSION,
        "status": outcome.status,
        "finished_at_ms": outcome.finished_at_ms,
        "value": outcome.value,
        "exc_type": outcome.exc_type,
        "message": outcome.message,
        "traceback": outcome.traceback,
        "reason": outcome.reason,
        "attempt": outcome.attempt,
        "extra": outcome.extra,
    })


def decode_outcome(data: bytes) -> Outcome:
    obj = _unpack(data, "outcome")
    try:
        return Outcome(
            status=obj["status"], finished_at_ms=int(obj["finished_at_ms"]),
            value=obj.get("value"), exc_type=obj.get("exc_type", ""),
            message=obj.get("message", ""), traceback=obj.get("traceback", ""),
            reason=obj.get("reason", ""), attempt=int(obj.get("attempt", 0)),
            extra=dict(obj.get("extra") or {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise DecodeError(f"cannot decode outcome: missing or invalid field {exc}") from exc
