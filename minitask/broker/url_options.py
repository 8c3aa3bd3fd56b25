"""What a broker URL's query may set, checked as its client is made.

redis-py copies a URL's query into its pool's and connections' keyword arguments,
and some of what it accepts there fails only at the first command, as a raw
traceback from inside redis-py: a name no connection takes (``?foo=1``, or
``ssl_cert_reqs`` on a ``redis://`` URL), a socket timeout of ``nan``, ``inf``,
``-1`` or ``0`` (a non-blocking socket: every call fails at once, "is Redis
running?"), an unknown ``encoding``. A URL gives only text, and redis-py hands
the text on as it is unless it has a converter for the name: a name taken only
as a Python object (``retry``, ``credential_provider``, ``connection_class``...)
or as a number or flag redis-py does not convert (``socket_type``) is refused by
name too, found by the parameters' annotations (or defaults), not by a list.
Refused here with the option named, none of them reaches a worker's loop or a
producer's ``delay()``.
"""
from __future__ import annotations

import codecs
import re
import inspect
import math
from typing import Any, Callable, Dict, FrozenSet, List, Optional
from urllib.parse import parse_qs, urlsplit

#: Options whose value is how long a socket may wait, in seconds.
SOCKET_WAITS = ("socket_timeout", "socket_connect_timeout")
#: The longest socket wait taken: a year (far larger ones overflow the C timeval).
LONGEST_WAIT_S = 365 * 86400

#: The types of a parameter whose text a converter can turn into its value.
_CONVERTIBLE = ("int", "float", "bool")

#: The words redis-py reads as a TLS connection's certificate check (``ssl_cert_reqs``).
CERT_REQS = ("none", "optional", "required")

#: Taken by name whatever its value: refused as the client is made (any text reads as
#: true, and minitask needs bytes replies), naming it.
_CHECKED_AFTER = frozenset({"decode_responses"})

_accepted: Dict[Any, Dict[str, str]] = {}


def query(url: str) -> Dict[str, List[str]]:
    """The URL's query options, each with its values (redis-py takes the first)."""
    return parse_qs(urlsplit(url).query)


def check_values(url: str) -> None:
    """Refuse values redis-py takes but cannot use (ValueError, naming the option)."""
    options = query(url)

    def first(name: str) -> str:
        return (options.get(name) or [""])[0]

    max_connections = first("max_connections")
    if _is_zero(max_connections):
        raise ValueError(f"max_connections must be 1 or more, not {max_connections!r} "
                         f"(redis-py would read 0 as no limit on the pool's connections); "
                         f"leave it out for the default")
    sentinels = urlsplit(url).scheme.lower() == "redis+sentinel"
    for name in [*SOCKET_WAITS, *(f"sentinel_{wait}" for wait in SOCKET_WAITS if sentinels)]:
        value = first(name)
        try:
            seconds = float(value)
        except ValueError:
            continue  # none given, or not a number: redis-py's own check names it
        if not (math.isfinite(seconds) and 0 < seconds <= LONGEST_WAIT_S):
            why = " (0 would make every socket non-blocking)" if seconds == 0 else ""
            raise ValueError(f"{name} must be a number of seconds above 0 and at most "
                             f"{LONGEST_WAIT_S} (a year), not {value!r}{why}")
    interval = first("health_check_interval")
    if (_number(interval, int) or 0) < 0:
        raise ValueError(f"health_check_interval must be 0 (no checks) or more seconds, "
                         f"not {interval!r}")
    for name, look_up in (("encoding", codecs.lookup), ("encoding_errors", codecs.lookup_error)):
        value = first(name)
        try:
            if value:
                look_up(value)
        except LookupError:
            raise ValueError(f"{name} {value!r} is no {name.replace('_', ' ')} handler "
                             f"Python knows" if name == "encoding_errors" else
                             f"encoding {value!r} is no encoding Python knows") from None
    for name in ("ssl_cert_reqs", *(("sentinel_ssl_cert_reqs",) if sentinels else ())):
        _check_cert_reqs(name, first(name))
    _check_db(url)


def _check_cert_reqs(name: str, value: str) -> None:
    """redis-py reads only these words, and refuses any other only as it opens the
    first connection (the first command fails, not the app's start)."""
    if value and value not in CERT_REQS:
        meant = value.lower().replace("cert_", "", 1)  # Python's ssl.CERT_NONE: "none"
        hint = f" ({value} is {meant!r} here)" if meant in CERT_REQS else ""
        raise ValueError(f"{name} must be one of {', '.join(CERT_REQS)}, not {value!r}{hint}")


def _check_db(url: str) -> None:
    """A ``redis://`` or ``rediss://`` URL's path names a db by number: redis-py skips
    one that is not (``/abc``) and uses db 0 unsaid."""
    parts = urlsplit(url)
    db = parts.path.strip("/")
    number = _number(db, int)
    if parts.scheme.lower() in ("redis", "rediss") and db and (number is None or number < 0):
        raise ValueError(f"the path names the db by its number, 0 or more: not {db!r}")


def check_names(url: str, client_class: type, connection_class: Any,
                converted: FrozenSet[str], also: FrozenSet[str] = frozenset(),
                sentinels: bool = False) -> None:
    """Refuse a query option that neither the client (or its pool) nor its connections
    take, nor ``also`` names, and one they take only as a value a URL cannot give: an
    object, or a number or flag that nothing converts from text (``converted``: the
    names redis-py's converters, or the caller's, convert). ``sentinels``: ``sentinel_*``
    options are the sentinels' own, checked as the rest without the prefix."""
    taken = {**_takes(client_class), **_takes(connection_class)}
    unknown, unusable = [], []
    for name in sorted(query(url)):
        own = name[len("sentinel_"):] if sentinels and name.startswith("sentinel_") else name
        if own in also or own in _CHECKED_AFTER:
            continue
        if own in _CONVERTED_TO_NOTHING:
            unusable.append((name, _CONVERTED_TO_NOTHING[own]))
        elif own not in taken:
            unknown.append(name)
        elif not _from_text(own, taken[own], converted):
            unusable.append((name, taken[own]))
    if unusable:
        name, kind = unusable[0]
        more = f" (and {len(unusable) - 1} more such)" if len(unusable) > 1 else ""
        kind = {"int": "an int", "float": "a float", "bool": "a bool"}.get(kind, kind)
        raise ValueError(f"option {name!r} cannot be given in a URL{more}: redis-py takes "
                         f"it as {kind}, and a URL gives only text that redis-py passes "
                         f"on as it is; leave it out, or pass a client made with it "
                         f"(broker=redis.Redis(...))")
    if unknown:
        hint = ("; TLS options need a rediss:// URL"
                if any(name.startswith("ssl") for name in unknown) else "")
        listed = ", ".join(repr(name) for name in unknown)
        whose = getattr(connection_class, "__name__", None) or "connection"
        raise ValueError(f"unknown option{'s' if len(unknown) > 1 else ''} {listed}: "
                         f"redis-py's {whose} takes no such argument{hint}")


def convertible(cls: Any, to_bool: Callable[[str], Any]) -> Dict[str, Callable[[str], Any]]:
    """The parameters ``cls`` takes as an int, float or bool, each with the converter
    of its text (``to_bool``: a bool's, as redis-py reads one): for callers that build
    the client from a URL's options themselves."""
    converters: Dict[str, Callable[[str], Any]] = {"int": int, "float": float,
                                                   "bool": to_bool}
    return {name: converters[kind] for name, kind in _takes(cls).items()
            if kind in converters}


#: Options redis-py converts from a URL's text, but to nothing it can use: the list
#: of a text's characters, where it needs exception classes (every connection error
#: then raised a TypeError of its own, the cause hidden). What each takes.
_CONVERTED_TO_NOTHING = {"retry_on_error": "a list of exception classes"}


def _from_text(name: str, kind: str, converted: FrozenSet[str]) -> bool:
    return kind in ("text", "unknown") or name in converted


def _is_zero(value: str) -> bool:
    try:  # as redis-py reads it: int()
        return int(value) == 0
    except ValueError:
        return False  # not a number (or none): redis-py's own check names it


def _number(value: str, kind: Callable[[str], Any]) -> Optional[Any]:
    """``value`` read as redis-py reads it; None when it is no such number."""
    try:
        return kind(value)
    except ValueError:
        return None


def _takes(cls: Any) -> Dict[str, str]:
    """The keyword arguments ``cls`` and the classes it builds on take by name, each
    with what it takes: "text", "int", "float", "bool", "unknown" (no annotation nor
    default tells: taken as text) or the object's type as annotated. Never raises: a
    ``cls`` that is no class (a URL's ``?connection_class=x``) takes nothing."""
    found = _accepted.get(cls)
    if found is not None:
        return found
    names: Dict[str, str] = {}
    for base in reversed(getattr(cls, "__mro__", None) or ()):
        init = getattr(base, "__dict__", {}).get("__init__")
        if init is None:
            continue
        try:
            parameters = list(inspect.signature(init).parameters.values())
        except (TypeError, ValueError):  # a C type's: nothing a URL sets
            continue
        names.update((parameter.name, _kind(parameter)) for parameter in parameters
                     if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD,
                                           parameter.KEYWORD_ONLY))
    names.pop("self", None)
    try:
        _accepted[cls] = names
    except TypeError:  # not hashable: not kept
        pass
    return names


def _kind(parameter: inspect.Parameter) -> str:
    """What a parameter takes, from its annotation, else its default."""
    annotation = parameter.annotation
    if annotation is not parameter.empty:
        text = annotation if isinstance(annotation, str) else repr(annotation)
        text = text.replace("typing.", "").replace("<class '", "").replace("'>", "")
        words = set(_WORD.findall(text)) - {"Optional", "Union", "None", "NoneType", "object"}
        if "str" in words:
            return "text"
        if len(words) == 1 and words <= set(_CONVERTIBLE):
            return str(words.pop())
        return f"an object ({text})"
    default = parameter.default
    if default is parameter.empty or default is None or isinstance(default, str):
        return "text" if isinstance(default, str) else "unknown"
    if type(default).__name__ in _CONVERTIBLE:
        return type(default).__name__
    return f"an object (like its default, {_described(default)})"


def _described(value: Any) -> Optional[str]:
    return getattr(value, "__name__", None) or type(value).__name__


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
