"""What a client's replies must be for minitask to read them: bytes, in RESP2.

minitask reads messages as msgpack bytes (a client made with ``decode_responses=True``
hands it text), and reads Redis's replies as RESP2 shapes them: RESP3 (``protocol=3``)
makes some of them maps, which a worker's wait for cancel requests could not read (it
logged an internal error every second, and ``cancel(running=True)`` stopped nothing;
probe 29q). So both are refused when the client is given, before anything is sent.
"""
from __future__ import annotations

from typing import Any, Dict

from ..errors import ConfigurationError


def connection_settings(client: Any) -> Dict[str, Any]:
    """The settings each connection of ``client`` is made with (a standalone or
    Sentinel client's pool's, a Redis Cluster client's nodes'; sync or asyncio)."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None)
    return dict(kwargs or {})


def require_readable_replies(client: Any, whose: str) -> None:
    """Raise ConfigurationError when ``client`` (``whose``: "it", "the async_broker")
    decodes replies or speaks RESP3."""
    kwargs = connection_settings(client)
    if kwargs.get("decode_responses"):
        raise ConfigurationError(f"minitask needs a Redis client that returns bytes: create "
                                 f"{whose} without decode_responses=True")
    if str(kwargs.get("protocol") or 2) != "2":
        raise ConfigurationError(
            f"minitask needs Redis's RESP2 replies, but {whose} was made with protocol="
            f"{kwargs['protocol']}{' (RESP3)' if str(kwargs['protocol']) == '3' else ''}: "
            f"leave the protocol setting out (of the broker "
            f"URL's query, ?protocol=, or the client's keyword arguments), or set it to 2")
