"""msgpack <-> Message and Outcome, inside a versioned envelope.

Every value is checked before packing so that an unsupported one is reported with
its path (``args[1]['when']``) and nothing reaches Redis. Every message is checked
after unpacking, field by field, so that what a worker gets from ``decode_message``
is a well-formed ``Message`` or a ``DecodeError`` saying which field is wrong: never
a value that makes the worker's own code raise later.
"""
from __future__ import annotations

import datetime as _dt
import decimal
import itertools
import math
import re
import threading
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import msgpack  # type: ignore[import-untyped]

from ..errors import DecodeError, EncodeError
from ..printable import SafeRepr
from .message import (ENVELOPE_VERSION, MAX_ATTEMPT, MAX_ID_BYTES, MAX_MS, MAX_NAME_BYTES,
                      Message, Outcome, Progress, describe_char, texts_repaired, to_seconds,
                      undecodable, unprintable)
from .types import APP_CODES, pack_builtin, unknown_extension, unpack_builtin

_INT_MIN = -(2 ** 63)
_INT_MAX = 2 ** 63 - 1
_SCALARS = (str, bytes, float, bool, type(None), uuid.UUID, decimal.Decimal)
_CONTAINERS = (list, tuple, dict)
#: Exact types that are always sendable, whatever their value (an int may not be).
_PLAIN = frozenset({bytes, float, bool, type(None)})
#: The exact types msgpack decodes scalars to (timestamps as aware datetimes; UUID
#: and Decimal are built-in extension types; an app's arrive as ExtType, types.py).
_DECODED_SCALARS = frozenset({str, bytes, int, float, bool, type(None), _dt.datetime,
                              uuid.UUID, decimal.Decimal})
#: Containers one argument may nest (a flat list is 1). msgpack itself gives up
#: near 1024 for a whole envelope, with a ValueError that names nothing.
MAX_DEPTH = 512
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNIX_MS = " (Unix time in milliseconds, up to the end of year 9999)"
_SHOWN = 120  # how much of a path an error message shows
_HOLDING = {"id": "an id may hold", "task": "a task name may hold"}  # (_Fields.text)
#: How refused values are shown: reprlib cuts long and deeply nested values short.
_REPR = SafeRepr()
_REPR.maxstring = _REPR.maxother = 80

#: A step from a container to one of its parts: ("index", 3), ("item", key), ("key", key).
_Step = Tuple[str, Any]
#: Where a value sits: the path of the root, or (parent, step), rendered only for errors.
_Node = Tuple[Any, ...]


def check_value(value: Any, path: str, task_name: str) -> None:
    """Raise EncodeError unless ``value`` is made only of supported types.

    The walk keeps its own stack, so a deeply nested value, or one that holds
    itself, is refused with its path rather than with a RecursionError.
    """
    if not _is_container(value):
        _check_scalar(value, path, task_name)
        return
    root: _Node = (path,)
    stack: List[Tuple[Iterator[Tuple[_Step, Any]], _Node]] = [(_parts(value), root)]
    while stack:
        parts, node = stack[-1]
        for step, item in parts:
            if not _is_container(item):
                _check_scalar(item, (node, step), task_name)
                continue
            child = (node, step)
            if step[0] == "key":
                # msgpack would decode an array key as a list, which cannot be a dict key
                raise EncodeError(f"task {task_name!r}: cannot send dict key {_shown(item)} "
                                  f"at {_short(_render(node))}: keys must be scalars; "
                                  f"convert it to a str", task_name=task_name,
                                  path=_render(child))
            if len(stack) >= MAX_DEPTH:
                where = _render(child)
                raise EncodeError(
                    f"task {task_name!r}: cannot send the value at {_short(where)}: it is "
                    f"nested more than {MAX_DEPTH} levels deep (or holds itself); flatten "
                    f"it or send it as text (e.g. JSON)", task_name=task_name, path=where)
            stack.append((_parts(item), child))
            break
        else:
            stack.pop()


def _is_container(value: Any) -> bool:
    """A list, tuple or dict to walk into (an extension value is a tuple, and one value)."""
    return isinstance(value, _CONTAINERS) and type(value) is not msgpack.ExtType


def _check_scalar(value: Any, where: str | _Node, task_name: str) -> None:
    """Raise EncodeError unless ``value`` (not a container) can be sent."""
    if isinstance(value, str):
        surrogate = None if value.isascii() else _SURROGATE.search(value)
        if surrogate is None:
            return
        subject = _shown(value)
        reason = (f"it holds the lone surrogate {describe_char(surrogate.group())}, which "
                  f"UTF-8 cannot carry; repair the text (e.g. decode it with "
                  f"errors='replace') or send bytes")
    elif isinstance(value, _SCALARS):
        return
    elif type(value) is msgpack.ExtType:
        if value.code in APP_CODES and type(value.data) is bytes:
            return
        subject = _shown(value)
        reason = (f"an application's extension type needs a code from {APP_CODES.start} to "
                  f"{APP_CODES.stop - 1} and bytes; register the type with "
                  f"app.register_type instead")
    elif isinstance(value, int):
        if _INT_MIN <= value <= _INT_MAX:
            return
        subject = _shown(value)
        reason = "integers must fit in signed 64 bits; send it as a str"
    elif isinstance(value, _dt.datetime):
        if value.tzinfo is not None and value.utcoffset() is not None:
            return
        subject = f"naive datetime {_shown(value)}"
        reason = ("its time zone is unknown; attach one, e.g. "
                  ".replace(tzinfo=timezone.utc)")
    else:
        subject = _shown(value)
        reason = (f"{type(value).__name__} is not a type minitask carries (None, bool, int, "
                  f"float, str, bytes, list, tuple, dict, aware datetime, UUID, Decimal); "
                  f"convert it first, or register it with app.register_type")
    path = where if isinstance(where, str) else _render(where)
    raise EncodeError(f"task {task_name!r}: cannot send {subject} at {_short(path)}: {reason}",
                      task_name=task_name, path=path)


def _parts(container: Any) -> Iterator[Tuple[_Step, Any]]:
    if isinstance(container, dict):
        for key, item in container.items():
            yield ("key", key), key
            yield ("item", key), item
    else:
        for index, item in enumerate(container):
            yield ("index", index), item


def _render(node: _Node) -> str:
    steps: List[_Step] = []
    while len(node) == 2:
        node, step = node
        steps.append(step)
    text = [node[0]]
    for kind, key in reversed(steps):
        text.append(f"[{key}]" if kind == "index" else
                    f"[{_shown(key)}]" if kind == "item" else f" key {_shown(key)}")
    return "".join(text)


def _shown(value: Any) -> str:
    """``repr(value)``, cut short (and safe from deep nesting): errors must stay readable."""
    return _REPR.repr(value)


def _short(text: str) -> str:
    if len(text) <= _SHOWN:
        return text
    return f"{text[:_SHOWN - 30]}...{text[-20:]} ({len(text)} characters)"


def check_arguments(task_name: str, args: Any, kwargs: Dict[str, Any]) -> None:
    for index, item in enumerate(args):
        kind = type(item)
        if (kind is str and item.isascii() or kind is int and _INT_MIN <= item <= _INT_MAX
                or kind in _PLAIN):
            continue  # what most calls pass, checked without a call or a path string
        check_value(item, f"args[{index}]", task_name)
    for key, item in kwargs.items():
        if type(key) is not str or not key.isascii():
            check_value(key, f"kwargs key {key!r}", task_name)
        check_value(item, f"kwargs[{key!r}]", task_name)


#: Each thread's msgpack Packer, kept between calls: ``msgpack.packb`` builds one for
#: every call, which costs more than packing a task's outcome (2 us against 0.6).
_packers = threading.local()


def _pack(obj: Any) -> bytes:
    # taken out while in use: a call made meanwhile on this thread (a signal
    # handler's) packs with a Packer of its own, never into this one's buffer;
    # one whose pack raised is not put back
    packer = _packers.__dict__.pop("packer", None)
    if packer is None:
        packer = msgpack.Packer(use_bin_type=True, datetime=True, default=pack_builtin)
    packed: bytes = packer.pack(obj)
    _packers.packer = packer
    return packed


def _unpack(data: bytes, what: str) -> Dict[str, Any]:
    try:
        obj = msgpack.unpackb(data, raw=False, timestamp=3, strict_map_key=False,
                              ext_hook=unpack_builtin)
    except Exception as exc:  # msgpack raises many unrelated types for corrupt input
        raise DecodeError(f"cannot decode {what}: {undecodable(exc)}") from exc
    if not isinstance(obj, dict):
        raise DecodeError(f"cannot decode {what}: expected a map, got {type(obj).__name__}")
    version = obj.get("v")
    if type(version) is int and version > ENVELOPE_VERSION:
        raise DecodeError(f"cannot decode {what}: written by a newer minitask (envelope "
                          f"version {version}; this minitask reads version "
                          f"{ENVELOPE_VERSION}): upgrade minitask here to read it")
    if type(version) is not int or version != ENVELOPE_VERSION:
        raise DecodeError(f"cannot decode {what}: unknown envelope version {_shown(version)} "
                          f"(this minitask reads version {ENVELOPE_VERSION})")
    return obj


def encode_message(message: Message) -> bytes:
    """Pack a message whose arguments were already checked by ``check_arguments``."""
    fields: Dict[str, Any] = {
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
    }
    if message.workflow is not None:
        fields["wf"] = message.workflow  # absent from plain tasks: their bytes are unchanged
    if message.trace:
        fields["tc"] = message.trace  # likewise; a reader that predates it ignores it
    try:
        return _pack(fields)
    except (TypeError, ValueError, OverflowError) as exc:  # UnicodeEncodeError included
        raise EncodeError(f"task {message.task!r}: cannot encode message {message.id!r}: "
                          f"{type(exc).__name__}: {exc}", task_name=str(message.task),
                          path="message") from exc


def decode_message(data: bytes) -> Message:
    """Unpack a message and check every field's type and range.

    Raises:
        DecodeError: corrupt bytes, an unknown envelope version, or a field that is
            missing or wrong; the message names the field, its value and the rule.
    """
    obj = _unpack(data, "message")
    return _plain_message(obj) or _checked_message(obj)


def _plain_message(obj: Dict[str, Any]) -> Optional[Message]:
    """The message, when every field is plainly right: ASCII names, flat arguments.
    The worker decodes every task it runs, so the usual message is checked here in one
    expression; anything else (an error, non-ASCII text, nested arguments) takes the
    thorough path, which says what is wrong."""
    try:
        task_id, task, queue, args, kwargs = (obj["id"], obj["task"], obj["queue"],
                                              obj["args"], obj["kwargs"])
        priority, enqueued_at_ms, eta_ms = obj["priority"], obj["enqueued_at_ms"], obj["eta_ms"]
        attempt = obj["attempt"]
    except KeyError:
        return None
    if "wf" in obj or "tc" in obj:
        return None  # a workflow step or a traced call: checked on the thorough path
    if (type(task_id) is str and type(task) is str and type(queue) is str
            and 0 < len(task_id) <= MAX_ID_BYTES and 0 < len(task) <= MAX_NAME_BYTES and queue
            and (names := task_id + task + queue).isascii() and names.isprintable()
            and type(priority) is int and 0 <= priority <= 9
            and type(enqueued_at_ms) is int and 0 <= enqueued_at_ms <= MAX_MS
            and (eta_ms is None or type(eta_ms) is int and 0 <= eta_ms <= MAX_MS)
            and type(attempt) is int and 1 <= attempt <= MAX_ATTEMPT
            and type(args) is list and type(kwargs) is dict):
        for item in args:
            if type(item) not in _DECODED_SCALARS:
                return None
        for key, item in kwargs.items():
            if type(key) is not str or type(item) not in _DECODED_SCALARS:
                return None
        return Message(id=task_id, task=task, args=args, kwargs=kwargs, queue=queue,
                       priority=priority, enqueued_at_ms=enqueued_at_ms, eta_ms=eta_ms,
                       attempt=attempt)
    return None


def _checked_message(obj: Dict[str, Any]) -> Message:
    fields = _Fields(obj)
    return Message(
        id=fields.text("id", MAX_ID_BYTES), task=fields.text("task", MAX_NAME_BYTES),
        args=fields.args(),
        kwargs=fields.kwargs(), queue=fields.text("queue"),
        priority=fields.integer("priority", 0, 9),
        enqueued_at_ms=fields.integer("enqueued_at_ms", 0, MAX_MS, _UNIX_MS),
        eta_ms=fields.optional_integer("eta_ms", 0, MAX_MS, _UNIX_MS),
        attempt=fields.integer("attempt", 1, MAX_ATTEMPT, default=1),
        workflow=fields.optional_bytes("wf"), trace=_trace(obj.get("tc")))


#: Most entries, and longest text, a message's trace context may hold.
_TRACE_ENTRIES = 8
_TRACE_TEXT = 512


def _trace(value: Any) -> Optional[Dict[str, str]]:
    """A trace context as a producer wrote it; anything else is dropped, not an error:
    a task must not fail for the sake of its tracing."""
    if (type(value) is not dict or not 0 < len(value) <= _TRACE_ENTRIES
            or not all(type(k) is str and type(v) is str and len(k) <= _TRACE_TEXT
                       and len(v) <= _TRACE_TEXT for k, v in value.items())):
        return None
    return value


class _Fields:
    """Reads the fields of one unpacked message, each checked, naming it on error."""

    def __init__(self, obj: Dict[str, Any]) -> None:
        self.obj = obj
        task_id = obj.get("id")
        self.what = "message"
        if isinstance(task_id, str) and unprintable(task_id) is None:
            self.what = f"message {_short(repr(task_id))}"

    def fail(self, name: str, rule: str) -> DecodeError:
        if name not in self.obj:
            return DecodeError(f"cannot decode {self.what}: field {name!r} is missing")
        return DecodeError(f"cannot decode {self.what}: field {name!r} is "
                           f"{_shown(self.obj[name])}; {rule}")

    def text(self, name: str, most: int = 0) -> str:
        value = self.obj.get(name)
        if not isinstance(value, str) or not value:
            raise self.fail(name, "expected a non-empty str")
        char = unprintable(value)
        if char is not None:
            raise self.fail(name, f"it holds {describe_char(char)}, a control or format "
                                  f"character")
        if most and (size := len(value.encode())) > most:  # the id: MAX_ID_BYTES
            raise self.fail(name, f"it is {size:,} bytes, over the {most} {_HOLDING[name]}")
        return value

    def integer(self, name: str, low: int, high: int, unit: str = "",
                default: Optional[int] = None) -> int:
        value = self.obj.get(name, default)
        if type(value) is not int or not low <= value <= high:
            raise self.fail(name, f"expected an int from {low} to {high}{unit}")
        return value

    def optional_integer(self, name: str, low: int, high: int, unit: str = "") -> Optional[int]:
        if self.obj.get(name) is None:
            return None
        return self.integer(name, low, high, unit)

    def optional_bytes(self, name: str) -> Optional[bytes]:
        value = self.obj.get(name)
        if value is not None and type(value) is not bytes:
            raise self.fail(name, "expected bin (bytes) or nil")
        return value

    def args(self) -> List[Any]:
        value = self.obj.get("args")
        if type(value) is not list:
            raise self.fail("args", "expected an array of arguments")
        for index, item in enumerate(value):
            self.check_decoded("args", item, f"args[{index}]")
        return value

    def kwargs(self) -> Dict[str, Any]:
        value = self.obj.get("kwargs")
        if type(value) is not dict:
            raise self.fail("kwargs", "expected a map of keyword arguments")
        for key, item in value.items():
            if not isinstance(key, str):
                raise self.fail("kwargs", f"key {_shown(key)} is not a str")
            self.check_decoded("kwargs", item, f"kwargs[{key!r}]")
        return value

    def check_decoded(self, name: str, value: Any, path: str) -> None:
        """Arguments hold only what an enqueue accepts: no unknown msgpack extension
        type, no nesting deeper than an enqueue allows."""
        pending = [(value, 1)]
        while pending:
            item, depth = pending.pop()
            if type(item) in _DECODED_SCALARS:
                continue
            if type(item) is msgpack.ExtType:
                unknown = unknown_extension(item)
                if unknown is not None:
                    raise self.fail(name, f"{path} holds {_shown(item)}: {unknown}")
                continue  # an app's type: the worker's registry reads it (types.py)
            if type(item) is list:
                parts: Iterable[Any] = item
            elif type(item) is dict:
                parts = itertools.chain(item.keys(), item.values())
            else:
                raise self.fail(name, f"{path} holds {_shown(item)}, which no enqueue "
                                      f"sends ({type(item).__name__})")
            if depth > MAX_DEPTH:
                raise self.fail(name, f"{path} is nested more than {MAX_DEPTH} levels deep")
            for part in parts:
                if type(part) not in _DECODED_SCALARS:
                    pending.append((part, depth + 1))


def encode_outcome(outcome: Outcome, *, task_name: str = "?") -> bytes:
    """Pack an outcome; raises EncodeError when a task's return value is unsupported.

    Error texts (an exception's message, a traceback) may hold lone surrogates,
    which UTF-8 cannot carry: those become U+FFFD rather than fail the record.
    """
    if outcome.value is not None:
        check_value(outcome.value, "return value", task_name)
    return _pack({
        "v": ENVELOPE_VERSION,
        "status": outcome.status,
        "finished_at_ms": outcome.finished_at_ms,
        "value": outcome.value,
        "exc_type": texts_repaired(outcome.exc_type),
        "message": texts_repaired(outcome.message),
        "traceback": texts_repaired(outcome.traceback),
        "reason": texts_repaired(outcome.reason),
        "attempt": outcome.attempt,
        "extra": outcome.extra,
    })


def decode_outcome(data: bytes) -> Outcome:
    obj = _unpack(data, "outcome")
    texts = {name: obj.get(name, "") for name in ("exc_type", "message", "traceback",
                                                  "reason")}
    numbers = {"finished_at_ms": obj.get("finished_at_ms"), "attempt": obj.get("attempt", 0)}
    extra = obj.get("extra") or {}
    status: Any = obj.get("status")
    for name, value in [("status", status), *texts.items()]:
        if not isinstance(value, str):
            raise DecodeError(f"cannot decode outcome: field {name!r} is {_shown(value)}; "
                              f"expected a str")
    for name, value in numbers.items():
        if type(value) is not int:
            raise DecodeError(f"cannot decode outcome: field {name!r} is {_shown(value)}; "
                              f"expected an int")
    if not isinstance(extra, dict):
        raise DecodeError(f"cannot decode outcome: field 'extra' is {_shown(extra)}; "
                          f"expected a map")
    return Outcome(status=status, finished_at_ms=numbers["finished_at_ms"],
                   value=obj.get("value"), extra=extra, **texts, attempt=numbers["attempt"])


def pack_data(data: Any, what: str) -> bytes:
    """Pack internal data that minitask built (workflow plans, member results, records
    of outcomes), its values checked (``check_value``): a text UTF-8 cannot carry is the
    app's (an exception's), packed ``texts_repaired``. ``what`` names it in an error."""
    try:
        return _pack(data)
    except UnicodeEncodeError:
        return pack_data(texts_repaired(data), what)
    except (TypeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"cannot encode {what}: {type(exc).__name__}: {exc}",
                          task_name="?", path=what) from exc


def unpack_data(data: bytes, what: str) -> Any:
    """Unpack what ``pack_data`` packed; DecodeError names ``what`` when it is corrupt."""
    try:
        return msgpack.unpackb(data, raw=False, timestamp=3, strict_map_key=False,
                               ext_hook=unpack_builtin)
    except Exception as exc:  # msgpack raises many unrelated types for corrupt input
        raise DecodeError(f"cannot decode {what}: {undecodable(exc)}") from exc


# -- progress (set_progress) ------------------------------------------------------

def pack_progress(current: float, total: Optional[float], message: Optional[str],
                  at_ms: int) -> bytes:
    return pack_data([current, total, message, at_ms], "progress")


def unpack_progress(data: bytes) -> Optional[Progress]:
    """The progress packed in ``data``; None when it is not one minitask wrote."""
    try:
        fields: Any = unpack_data(data, "progress")
    except DecodeError:
        return None  # not one minitask wrote: as if none
    if not isinstance(fields, list) or len(fields) != 4:
        return None
    current, total, message, at_ms = fields
    if (not _number(current) or not (total is None or _number(total))
            or not (message is None or isinstance(message, str))
            or type(at_ms) is not int or not 0 <= at_ms <= MAX_MS):
        return None
    return Progress(current, total, message,
                    _dt.datetime.fromtimestamp(to_seconds(at_ms), tz=_dt.timezone.utc))


def _number(value: Any) -> bool:
    return (type(value) in (int, float)) and math.isfinite(value)
