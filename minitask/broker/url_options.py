"""What a broker URL's query may set, checked as its client is made.

redis-py copies a URL's query into its pool's and connections' keyword arguments,
and some of what it accepts there fails only at the first command, as a raw
traceback from inside redis-py: a name no connection takes (``?foo=1``, or
``ssl_cert_reqs`` on a ``redis://`` URL), a socket timeout of ``nan``, ``inf``,
``-1`` or ``0`` (a non-blocking socket: every call fails at once, "is Redis
running?"). Refused here with the option named, none of them reaches a worker's
loop or a producer's ``delay()``.
"""
from __future__ import annotations

import inspect
import math
from typing import Dict, FrozenSet, List
from urllib.parse import parse_qs, urlsplit

#: Options whose value is how long a socket may wait, in seconds.
SOCKET_WAITS = ("socket_timeout", "socket_connect_timeout")
#: The longest socket wait taken: a year (far larger ones overflow the C timeval).
LONGEST_WAIT_S = 365 * 86400

_accepted: Dict[type, FrozenSet[str]] = {}


def query(url: str) -> Dict[str, List[str]]:
    """The URL's query options, each with its values (redis-py takes the first)."""
    return parse_qs(urlsplit(url).query)


def check_values(url: str) -> None:
    """Refuse values redis-py takes but cannot use (ValueError, naming the option)."""
    options = query(url)
    max_connections = (options.get("max_connections") or [""])[0]
    if _is_zero(max_connections):
        raise ValueError(f"max_connections must be 1 or more, not {max_connections!r} "
                         f"(redis-py would read 0 as no limit on the pool's connections); "
                         f"leave it out for the default")
    for name in SOCKET_WAITS:
        value = (options.get(name) or [""])[0]
        try:
            seconds = float(value)
        except ValueError:
            continue  # none given, or not a number: redis-py's own check names it
        if not (math.isfinite(seconds) and 0 < seconds <= LONGEST_WAIT_S):
            why = " (0 would make every socket non-blocking)" if seconds == 0 else ""
            raise ValueError(f"{name} must be a number of seconds above 0 and at most "
                             f"{LONGEST_WAIT_S} (a year), not {value!r}{why}")


def check_names(url: str, client_class: type, connection_class: type,
                also: FrozenSet[str] = frozenset()) -> None:
    """Refuse a query option that neither the client (or its pool) nor its connections
    take, nor ``also`` names. ``sentinel_*`` options are the sentinels' own, read apart."""
    taken = _takes(client_class) | _takes(connection_class) | also
    unknown = sorted(name for name in query(url)
                     if name not in taken and not name.startswith("sentinel_"))
    if unknown:
        hint = ("; TLS options need a rediss:// URL"
                if any(name.startswith("ssl") for name in unknown) else "")
        listed = ", ".join(repr(name) for name in unknown)
        raise ValueError(f"unknown option{'s' if len(unknown) > 1 else ''} {listed}: "
                         f"redis-py's {connection_class.__name__} takes no such "
                         f"argument{hint}")


def _is_zero(value: str) -> bool:
    try:  # as redis-py reads it: int()
        return int(value) == 0
    except ValueError:
        return False  # not a number (or none): redis-py's own check names it


def _takes(cls: type) -> FrozenSet[str]:
    """The keyword arguments ``cls`` and the classes it builds on take by name."""
    found = _accepted.get(cls)
    if found is None:
        names = set()
        for base in cls.__mro__:
            init = base.__dict__.get("__init__")
            if init is None:
                continue
            try:
                parameters = inspect.signature(init).parameters.values()
            except (TypeError, ValueError):  # a C type's: nothing a URL sets
                continue
            names |= {parameter.name for parameter in parameters
                      if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD,
                                            parameter.KEYWORD_ONLY)}
        found = _accepted[cls] = frozenset(names - {"self"})
    return found
