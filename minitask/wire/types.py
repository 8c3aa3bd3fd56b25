"""Extension types: UUID and Decimal built in, and the types an app registers.

msgpack carries a value it has no type for as an *extension*: a code (an int
from -128 to 127) and bytes. minitask's codes, fixed (docs: reference/wire-format):

* ``1``  ``uuid.UUID``: the 16 bytes of the UUID, most significant first
  (``UUID.bytes``, RFC 4122 order);
* ``2``  ``decimal.Decimal``: its ``str()`` in UTF-8 (``"-1.50"``, ``"1E+3"``,
  ``"NaN"``, ``"Infinity"``, ``"sNaN"``), which ``Decimal(text)`` reads back exactly,
  sign, exponent and trailing zeros included.

Codes 0 to 31 are minitask's (a code of that range it does not know is a
DecodeError: a newer minitask wrote it); codes 32 to 127 are the applications'
(``app.register_type``); negative codes are msgpack's own (-1, its timestamp).

The built-in types are packed and unpacked by the serializer itself. An app's
types are turned into ``msgpack.ExtType`` values where a value enters (the
producer's arguments, a task's return value): inside minitask, and in Redis, they
travel as that code and those bytes, whoever reads them; they become the app's
objects again only where a value leaves (the arguments a task is called with, the
value ``get()`` returns), with the registry of the app that reads them.
"""
from __future__ import annotations

import decimal
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

import msgpack  # type: ignore[import-untyped]

from ..errors import ConfigurationError, DecodeError, EncodeError
from .message import ENVELOPE_VERSION

UUID_CODE = 1
DECIMAL_CODE = 2
#: The codes minitask keeps for itself, and those applications register.
MINITASK_CODES = range(0, 32)
APP_CODES = range(32, 128)
#: Types that hold no extension: arguments of these need no walk.
_PLAIN = frozenset({type(None), bool, int, float, str, bytes, uuid.UUID, decimal.Decimal})
#: Classes an app cannot register: msgpack's own and minitask's built-in ones.
_BUILT_IN = (type(None), bool, int, float, str, bytes, bytearray, list, tuple, dict,
             uuid.UUID, decimal.Decimal, msgpack.ExtType)


def pack_builtin(value: Any) -> Any:
    """msgpack's ``default``: the extension a built-in type is carried as."""
    if isinstance(value, uuid.UUID):
        return msgpack.ExtType(UUID_CODE, value.bytes)
    if isinstance(value, decimal.Decimal):
        return msgpack.ExtType(DECIMAL_CODE, str(value).encode("ascii"))
    raise TypeError(f"cannot serialize {type(value).__name__!r} object")


def unpack_builtin(code: int, data: bytes) -> Any:
    """msgpack's ``ext_hook``: a built-in type; anything else (an app's type, or a
    malformed or unknown one) stays an ``ExtType``, for the checks that follow to
    name with its path (``unknown_extension``)."""
    if code == UUID_CODE and len(data) == 16:
        return uuid.UUID(bytes=data)
    if code == DECIMAL_CODE:
        try:
            return decimal.Decimal(data.decode("ascii"))
        except (UnicodeDecodeError, decimal.InvalidOperation):
            pass
    return msgpack.ExtType(code, data)


def unknown_extension(value: Any) -> Optional[str]:
    """Why a decoded ``ExtType`` is not one an app may read, or None when it may."""
    if value.code in APP_CODES:
        return None
    if value.code == UUID_CODE:
        return (f"extension type code {UUID_CODE} (UUID) holding {len(value.data)} bytes, "
                f"not 16")
    if value.code == DECIMAL_CODE:
        return (f"extension type code {DECIMAL_CODE} (Decimal) holding "
                f"{value.data[:40]!r}, not a decimal number's text")
    return (f"extension type code {value.code}, which this minitask does not know (codes "
            f"{MINITASK_CODES.start} to {MINITASK_CODES.stop - 1} are minitask's: written by "
            f"a newer minitask?)")


#: One registered type: (class, code, encode, decode).
_Entry = Tuple[type, int, Callable[[Any], bytes], Callable[[bytes], Any]]


class TypeRegistry:
    """The application types of one app, by class and by extension code.

    A value is of a registered type when its class is registered, or else when it
    is an instance of a registered class (the first registered that matches): so
    an ``Enum`` registered once carries its members, and a subclass of a registered
    class travels as that class and comes back as what its ``decode`` returns.
    """

    def __init__(self) -> None:
        self._by_code: Dict[int, _Entry] = {}
        self._entries: List[_Entry] = []
        #: class -> the entry it travels as (None: not a registered type), learnt
        self._matches: Dict[type, Optional[_Entry]] = {}

    def __bool__(self) -> bool:
        return bool(self._entries)

    def register(self, cls: type, code: int, encode: Callable[[Any], bytes],
                 decode: Callable[[bytes], Any]) -> None:
        """Carry instances of ``cls`` as extension ``code``; see ``app.register_type``."""
        where = f"register_type({getattr(cls, '__name__', cls)!r}, {code!r})"
        if not isinstance(cls, type):
            raise ConfigurationError(f"{where}: the first argument must be a class, got "
                                     f"{cls!r}")
        if type(code) is not int or code not in APP_CODES:
            raise ConfigurationError(f"{where}: code must be an int from {APP_CODES.start} "
                                     f"to {APP_CODES.stop - 1} (0 to 31 are minitask's own, "
                                     f"1 UUID and 2 Decimal)")
        if cls in _BUILT_IN or cls.__module__ == "datetime":
            raise ConfigurationError(f"{where}: {cls.__name__} is carried by minitask "
                                     f"itself; register a class of your own")
        if not callable(encode) or not callable(decode):
            raise ConfigurationError(f"{where}: encode and decode must be callables "
                                     f"(value -> bytes, bytes -> value)")
        taken = self._by_code.get(code)
        if taken is not None:
            raise ConfigurationError(f"{where}: code {code} is taken by "
                                     f"{taken[0].__qualname__}; choose another code")
        for entry in self._entries:
            if entry[0] is cls:
                raise ConfigurationError(f"{where}: {cls.__qualname__} is registered "
                                         f"already, with code {entry[1]}")
        entry = (cls, code, encode, decode)
        self._entries.append(entry)
        self._by_code[code] = entry
        self._matches.clear()

    def _match(self, kind: type) -> Optional[_Entry]:
        try:
            return self._matches[kind]
        except KeyError:
            pass
        found = next((entry for entry in self._entries if entry[0] is kind), None)
        if found is None:
            found = next((entry for entry in self._entries if issubclass(kind, entry[0])),
                         None)
        self._matches[kind] = found
        return found

    # -- where values enter: objects -> extensions ------------------------------------

    def to_wire(self, value: Any, path: str, task_name: str) -> Any:
        """``value`` with every instance of a registered type made an extension.

        Raises:
            EncodeError: a type's ``encode`` raised or returned no bytes; names the
                task and the path.
        """
        if not self._entries:
            return value
        if not _holds(value, lambda part: self._match(type(part)) is not None):
            return value
        return self._walk(value, path, task_name, self._encoded)

    def arguments_to_wire(self, task_name: str, args: Any,
                          kwargs: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        """A call's arguments, made ready to check and pack (unchanged when the app
        registered no type)."""
        if not self._entries:
            return args, kwargs
        return ([self.to_wire(item, f"args[{index}]", task_name)
                 for index, item in enumerate(args)],
                {key: self.to_wire(item, f"kwargs[{key!r}]", task_name)
                 for key, item in kwargs.items()})

    def _encoded(self, value: Any, path: str, task_name: str) -> Any:
        entry = self._match(type(value))
        if entry is None:
            return _KEEP
        cls, code, encode, _ = entry
        try:
            data = encode(value)
        except Exception as exc:  # the app's function: any error is its own
            raise EncodeError(f"task {task_name!r}: cannot send {value!r:.80} at {path}: "
                              f"the encode function registered for {cls.__qualname__} "
                              f"(code {code}) raised {type(exc).__name__}: {exc}",
                              task_name=task_name, path=path) from exc
        if not isinstance(data, (bytes, bytearray)):
            raise EncodeError(f"task {task_name!r}: cannot send {value!r:.80} at {path}: "
                              f"the encode function registered for {cls.__qualname__} "
                              f"(code {code}) returned {type(data).__name__}, not bytes",
                              task_name=task_name, path=path)
        return msgpack.ExtType(code, bytes(data))

    # -- where values leave: extensions -> objects ------------------------------------

    def from_wire(self, value: Any, path: str, task_name: str) -> Any:
        """``value`` with every app extension made the registered type's object.

        Raises:
            DecodeError: an extension code this app did not register, or a type's
                ``decode`` raised; names the code, the task and the path.
        """
        if not _holds(value, lambda part: type(part) is msgpack.ExtType):
            return value  # the usual value: looked at once, without a copy
        return self._walk(value, path, task_name, self._decoded)

    def arguments_from_wire(self, task_name: str, args: Any,
                            kwargs: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        """The arguments a task is called with, from those its message carries (the
        same list and dict when no argument holds an extension: the usual call)."""
        for item in args:  # loops, not all() of a generator: one is made per task
            if type(item) not in _PLAIN:
                break
        else:
            for item in kwargs.values():
                if type(item) not in _PLAIN:
                    break
            else:
                return args, kwargs
        return ([self.from_wire(item, f"args[{index}]", task_name)
                 for index, item in enumerate(args)],
                {key: self.from_wire(item, f"kwargs[{key!r}]", task_name)
                 for key, item in kwargs.items()})

    def _decoded(self, value: Any, path: str, task_name: str) -> Any:
        if type(value) is not msgpack.ExtType:
            return _KEEP
        entry = self._by_code.get(value.code)
        unknown = unknown_extension(value)
        if unknown is not None:
            raise DecodeError(f"task {task_name!r}: cannot decode {path}: it holds {unknown}")
        if entry is None:
            raise DecodeError(f"task {task_name!r}: cannot decode {path}: extension type "
                              f"code {value.code} is not registered in this app; register "
                              f"the same type with app.register_type(cls, {value.code}, "
                              f"encode, decode) here as where it was sent")
        cls, code, _, decode = entry
        try:
            return decode(value.data)
        except Exception as exc:  # the app's function: any error is its own
            raise DecodeError(f"task {task_name!r}: cannot decode {path}: the decode "
                              f"function registered for {cls.__qualname__} (code {code}) "
                              f"raised {type(exc).__name__}: {exc}") from exc

    def _walk(self, value: Any, path: str, task_name: str,
              convert: Callable[[Any, str, str], Any], depth: int = 0) -> Any:
        """``value`` with ``convert`` applied to every part that is not a list, tuple
        or dict; containers are copied only when a part of them changed. Past
        ``_DEPTH`` levels (a value that holds itself) it stops: the serializer's own
        check then refuses the value with its path."""
        done = convert(value, path, task_name)
        if done is not _KEEP or depth > _DEPTH:
            return value if done is _KEEP else done
        if isinstance(value, dict):
            changed = False
            out = {}
            for key, item in value.items():
                new_key = self._walk(key, f"{path} key {key!r:.40}", task_name, convert,
                                     depth + 1)
                new_item = self._walk(item, f"{path}[{key!r:.40}]", task_name, convert,
                                      depth + 1)
                changed = changed or new_key is not key or new_item is not item
                out[new_key] = new_item
            return out if changed else value
        if isinstance(value, (list, tuple)) and type(value) is not msgpack.ExtType:
            items = []
            for index, item in enumerate(value):  # a loop, not a comprehension: one
                # frame per level, as deep as the serializer lets a value be
                items.append(self._walk(item, f"{path}[{index}]", task_name, convert,
                                        depth + 1))
            if any(new is not old for new, old in zip(items, value)):
                return items
            return value
        return value


def _holds(value: Any, wanted: Callable[[Any], bool]) -> bool:
    """Whether ``value`` or any part of it is ``wanted``; a loop with its own stack,
    so that a deep value costs no recursion, and each container is looked into once,
    so that one that holds itself ends."""
    stack = [value]
    opened = set()
    while stack:
        part = stack.pop()
        if wanted(part):
            return True
        if isinstance(part, (list, tuple, dict)) and type(part) is not msgpack.ExtType:
            if id(part) in opened:
                continue
            opened.add(id(part))
            if isinstance(part, dict):
                stack.extend(part.keys())
                stack.extend(part.values())
            else:
                stack.extend(part)
    return False


#: "not a value of this kind: leave it as it is" (None is a value).
_KEEP: Any = object()
#: How deep a value is walked: as deep as the serializer lets one be (MAX_DEPTH).
_DEPTH = 513


def head_fields(head: bytes) -> Dict[str, Any]:
    """The fields of a packed map (a message, an outcome) that its first bytes ``head``
    hold whole, in order, up to the first that is cut: what a listing shows of a
    letter too large to read. {} when ``head`` is no map of this envelope version.
    Nothing is checked beyond that: the caller checks each field it takes."""
    unpacker = msgpack.Unpacker(raw=False, timestamp=3, strict_map_key=False,
                                ext_hook=unpack_builtin, max_buffer_size=max(1, len(head)))
    found: Dict[str, Any] = {}
    try:
        unpacker.feed(head)
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()  # the key first: it comes first
            found[key] = unpacker.unpack()
    except Exception:  # noqa: BLE001 - cut here (OutOfData), or bytes no minitask wrote
        pass
    return found if found.get("v") == ENVELOPE_VERSION else {}
