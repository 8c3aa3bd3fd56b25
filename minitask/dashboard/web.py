"""The dashboard's WSGI application: routing, basic auth, CSRF, rendering.

Pages are Jinja2 templates with autoescaping on, so every value (task
arguments are user data) renders as text, and every string a page shows first
goes through ``printable`` (the Environment's ``finalize``), as on a terminal: a
control character or a bidirectional override read from Redis is shown as its
``\\x``/``\\u`` escape, never interpreted (a worker's host name could otherwise read
backwards). A form's value is the one exception (``field``): shown to no one,
it carries the id itself, so that the form posts it back. The one
script a page may run is this package's own ``live.js`` (inlined; it polls the
JSON API and writes text, never markup): the Content-Security-Policy allows
that script by its SHA-256 hash and no other, so a value that slipped through
could still not run. State changes are POST forms carrying a token
that only a page of this server holds; a cross-site form cannot know it.
Without auth, a dashboard on a loopback address answers only to loopback host
names: a site whose name its owner points at 127.0.0.1 (DNS rebinding) would
otherwise read its pages, token included, as its own.
"""
from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import hmac
import ipaddress
import json
import secrets
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
from urllib.parse import parse_qs, quote, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from ..app import Minitask
from ..errors import ConfigurationError, MinitaskError
from ..printable import encodable, own_logger, printable
from . import actions, views, workflow
from . import groups, subscribers  # noqa: F401  (register their sections)
from .metrics import exposition
from .sections import section, sections

logger = own_logger(__name__)

StartResponse = Callable[[str, List[Tuple[str, str]]], Any]
Environ = Dict[str, Any]

#: The Content-Security-Policy; {script} is the hash of live.js, the one script allowed.
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
       "script-src '{script}'; connect-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'")
SECURITY_HEADERS = [
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]
#: Largest POST body read (a form of a few fields).
MAX_BODY = 16_384
#: Notices kept for the page an action redirects to (the newest; each is shown by token).
MAX_NOTICES = 64


def wsgi_text(value: str) -> str:
    """A path or query string of a WSGI environ as the text the client sent: PEP 3333
    hands its bytes over decoded as Latin-1, so U+202E arrives as three characters;
    they are taken back to bytes and read as UTF-8 (a byte that is not: U+FFFD)."""
    try:
        raw = value.encode("latin-1")
    except UnicodeEncodeError:  # a server that decoded them already
        return value
    return raw.decode("utf-8", "replace")


class Response(Exception):
    """Ends a request early with a status and a plain text body."""

    def __init__(self, status: str, text: str, headers: Optional[List[Tuple[str, str]]] = None):
        super().__init__(text)
        self.status = status
        self.text = text
        self.headers = headers or []


class Dashboard:
    """One app's dashboard; ``auth`` is ``"user:password"`` or None (no auth);
    ``loopback``: it listens on a loopback address only."""

    def __init__(self, app: Minitask, auth: Optional[str] = None,
                 loopback: bool = False) -> None:
        self.app = app
        self._auth = None if auth is None else auth.encode()
        #: Refuse a Host header naming anything but this machine (DNS rebinding).
        self.local_names_only = loopback and auth is None
        self.csrf_token = secrets.token_urlsafe(32)
        # What an action did, by a token its redirect carries: a notice comes from this
        # server, never from the URL's text (a link could show anything in the banner)
        self._notices: "OrderedDict[str, str]" = OrderedDict()
        self._notices_lock = threading.Lock()
        loader = PackageLoader("minitask.dashboard", "templates")
        self._templates = Environment(loader=loader,
                                      autoescape=select_autoescape(default=True),
                                      trim_blocks=True, lstrip_blocks=True, finalize=shown)
        # the live-update script, inlined by pages and allowed by its hash alone
        self.live_js = loader.get_source(self._templates, "live.js")[0]
        digest = base64.b64encode(hashlib.sha256(self.live_js.encode()).digest()).decode()
        self._headers = [("Content-Security-Policy", CSP.format(script="sha256-" + digest))
                         ] + SECURITY_HEADERS
        self._templates.filters["ago"] = relative
        self._templates.filters["seconds"] = duration
        # a path segment built from Redis data: '/' quoted too (urlencode keeps it); a
        # lone surrogate (a JSON \\udc80 in Redis) as its escape, which UTF-8 can carry
        self._templates.filters["segment"] = lambda value: quote(encodable(str(value)),
                                                                 safe="")
        self._templates.filters["field"] = field
        Route = Callable[[Environ, Dict[str, List[str]]], Tuple[str, Any]]
        self._routes: Dict[str, Route] = {
            "": self._queues, "queues": self._queues, "workers": self._workers,
            "throughput": self._throughput, "task": self._task, "dead": self._dead,
            "schedules": self._schedules,
            "section": self._section,
            "worker": self._worker,
            "running": lambda environ, query: self._listing("running", query),
            "scheduled": lambda environ, query: self._listing("scheduled", query),
            "recent": lambda environ, query: self._listing("recent", query),
            "workflow": lambda environ, query: workflow.page(self.app, environ, query),
        }

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        try:
            self._check_host(environ)
            self._check_auth(environ)
            status, headers, body = self._dispatch(environ)
        except Response as early:
            status, headers, body = (early.status,
                                     [("Content-Type", "text/plain; charset=utf-8")]
                                     + early.headers, early.text.encode())
        except MinitaskError as exc:
            logger.warning("dashboard: %s", exc)
            status, headers, body = ("503 Service Unavailable",
                                     [("Content-Type", "text/plain; charset=utf-8")],
                                     f"{type(exc).__name__}: {exc}".encode())
        start_response(status, headers + self._headers
                       + [("Content-Length", str(len(body)))])
        return [body]

    # -- checks --------------------------------------------------------------

    def _check_host(self, environ: Environ) -> None:
        if not self.local_names_only or "HTTP_HOST" not in environ:
            return
        try:
            name = urlsplit("//" + environ["HTTP_HOST"]).hostname or ""
        except ValueError:
            name = ""
        if not is_loopback(name):
            raise Response("403 Forbidden", "this dashboard listens on a loopback address "
                           "without --auth and answers to localhost or 127.0.0.1 only")

    def _check_auth(self, environ: Environ) -> None:
        if self._auth is None:
            return
        given = environ.get("HTTP_AUTHORIZATION", "")
        scheme, _, encoded = given.partition(" ")
        try:
            credentials = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            credentials = b""
        if scheme.lower() != "basic" or not hmac.compare_digest(credentials, self._auth):
            raise Response("401 Unauthorized", "authentication required",
                           [("WWW-Authenticate", 'Basic realm="minitask", charset="UTF-8"')])

    def _check_post(self, environ: Environ, form: Dict[str, List[str]]) -> None:
        """A state change must come from a page of this dashboard: its token, and no
        foreign Origin."""
        origin = environ.get("HTTP_ORIGIN")
        if origin and origin != "null" and urlsplit(origin).netloc != environ.get("HTTP_HOST"):
            raise Response("403 Forbidden", "cross-site request refused")
        token = (form.get("csrf") or [""])[0]
        if not hmac.compare_digest(token.encode(), self.csrf_token.encode()):
            raise Response("403 Forbidden", "missing or wrong CSRF token; reload the page")

    # -- routing -------------------------------------------------------------

    def _dispatch(self, environ: Environ) -> Tuple[str, List[Tuple[str, str]], bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = wsgi_text(environ.get("PATH_INFO", "/")).strip("/")
        query = parse_qs(wsgi_text(environ.get("QUERY_STRING", "")))
        if path == "metrics" and method in ("GET", "HEAD"):
            return ("200 OK", [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                    exposition(self.app))
        if method == "POST":
            return self._post(path, environ)
        if method not in ("GET", "HEAD"):
            raise Response("405 Method Not Allowed", "use GET, or POST for actions",
                           [("Allow", "GET, HEAD, POST")])
        as_json = path == "api" or path.startswith("api/")
        if as_json:
            path = path[4:]
        page, _, rest = path.partition("/")
        if rest:
            query.setdefault("id", [rest])
        route = self._routes.get(page)
        if route is None:
            raise Response("404 Not Found", f"no page '{printable(path)}'")
        template, data = route(environ, query)
        if not template and not as_json:
            shown = printable(path)
            raise Response("404 Not Found", f"no page '{shown}'; its data is at /api/{shown}")
        if as_json:
            return ("200 OK", [("Content-Type", "application/json")],
                    json.dumps(data, default=repr, indent=1, sort_keys=True).encode())
        return "200 OK", [("Content-Type", "text/html; charset=utf-8")], self._render(
            template, data, query)

    def _render(self, template: str, data: Any, query: Dict[str, List[str]]) -> bytes:
        return self._templates.get_template(template).render(
            data=data, app=self.app.name, csrf=self.csrf_token, sections=sections(),
            live_js=self.live_js,
            notice=self._notice((query.get("notice") or [""])[0])).encode()

    def _notice(self, token: str) -> str:
        with self._notices_lock:
            return self._notices.get(token, "")

    def _keep_notice(self, notice: str) -> str:
        """Keep ``notice`` for the page an action redirects to; its token."""
        token = secrets.token_urlsafe(12)
        with self._notices_lock:
            self._notices[token] = notice
            while len(self._notices) > MAX_NOTICES:
                self._notices.popitem(last=False)
        return token

    # -- pages ---------------------------------------------------------------

    def _queues(self, environ: Environ, query: Dict[str, List[str]]) -> Tuple[str, Any]:
        data = views.queues(self.app)
        data["throughput"] = views.throughput(self.app)
        return "queues.html", data

    def _workers(self, environ: Environ, query: Dict[str, List[str]]) -> Tuple[str, Any]:
        return "workers.html", views.workers(self.app)

    def _throughput(self, environ: Environ, query: Dict[str, List[str]]) -> Tuple[str, Any]:
        return "throughput.html", views.throughput(self.app)

    def _task(self, environ: Environ, query: Dict[str, List[str]]) -> Tuple[str, Any]:
        task_id = (query.get("id") or [""])[0].strip()
        found = views.task(self.app, task_id) if task_id else None
        return "task.html", {"task_id": task_id, "task": found,
                             "now": views.now_iso(self.app)}

    def _dead(self, environ: Environ, query: Dict[str, List[str]]) -> Tuple[str, Any]:
        queue = (query.get("queue") or [""])[0] or None
        if queue is not None:
            self._check_queue(queue)
        return "dead.html", views.dead(self.app, queue)

    def _schedules(self, environ: Environ, query: Dict[str, List[str]]) -> Tuple[str, Any]:
        """A page of schedules: ?queue= (one queue), limit= (1 to LIST_LIMIT, default
        50), after= (where the page starts: the ``next`` of the page before)."""
        queue = (_first(query, "queue") or "").strip() or None
        if queue is not None:
            self._check_queue(queue)
        limit = _whole(query, "limit", views.SCHEDULES_PAGE, 1)
        try:
            return "schedules.html", views.schedules(self.app, queue,
                                                     _first(query, "after") or None, limit)
        except ConfigurationError as exc:
            raise Response("400 Bad Request", str(exc)) from exc

    def _worker(self, environ: Environ, query: Dict[str, List[str]]) -> Tuple[str, Any]:
        name = (query.get("id") or [""])[0]
        found = views.worker(self.app, name) if name else None
        if found is None:
            raise Response("404 Not Found",
                           f"no live worker is named '{printable(name)}'; see /workers")
        return "worker.html", found

    def _listing(self, which: str, query: Dict[str, List[str]]) -> Tuple[str, Any]:
        """Running, scheduled or recent tasks: ?queue= (repeatable), task= (a name or
        a glob), id= (one task), state= (recent), limit= (1 to LIST_LIMIT, default
        50), offset= (the tasks skipped: the next page)."""
        # ?queue= repeated, or names separated by commas (as the page's form sends them)
        queues = [name.strip() for queue in query.get("queue", [])
                  for name in queue.split(",") if name.strip()] or None
        for queue in queues or []:
            self._check_queue(queue)
        limit = _whole(query, "limit", 50, 1)
        offset = _whole(query, "offset", 0, 0)
        task = (_first(query, "task") or "").strip() or None
        state = (_first(query, "state") or "").strip() or None
        task_id = (_first(query, "id") or "").strip() or None
        try:
            data = views.listing(self.app, which, queues, task, state, limit, offset, task_id)
        except ConfigurationError as exc:
            raise Response("400 Bad Request", str(exc)) from exc
        data["filters"] = {"task": task or "", "id": task_id or "", "state": state or "",
                           "queue": ",".join(queues or []), "limit": limit}
        return "listing.html", data

    def _section(self, environ: Environ, query: Dict[str, List[str]]) -> Tuple[str, Any]:
        found = section((query.get("id") or [""])[0])
        if found is None:
            raise Response("404 Not Found", "no such section")
        return "section.html", {"title": found.title, "columns": found.columns,
                                "rows": found.rows(self.app)}

    # -- actions -------------------------------------------------------------

    def _post(self, path: str, environ: Environ) -> Tuple[str, List[Tuple[str, str]], bytes]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > MAX_BODY:
            raise Response("413 Payload Too Large", "form too large")
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        form = parse_qs(body.decode(errors="replace"))
        self._check_post(environ, form)
        acted = actions.perform(self.app, path, form,
                                lambda template, data: self._render(template, data, {}),
                                self._keep_notice)
        if acted is None:
            raise Response("404 Not Found", f"no action '{printable(path)}'")
        return acted

    def _check_queue(self, queue: str) -> None:
        """A queue name, or a broadcast lane's ``queue:subscriber``, as the actions
        check it (400 otherwise)."""
        try:
            actions.checked_queue(self.app, queue, known=False)
        except actions.Refused as exc:
            raise Response("400 Bad Request", str(exc)) from exc


def shown(value: Any) -> Any:
    """What a page shows of a value: a string as ``printable`` escapes it (newlines
    kept: a traceback's lines; in HTML text they move nothing), markup this package
    wrote (``|safe``) as it is, None (a value Redis held none readable of) as "?",
    anything else for Jinja to show."""
    if isinstance(value, str) and not hasattr(value, "__html__"):  # not markup (Markup)
        return printable(value, keep_newlines=True)
    return "?" if value is None else value


def field(value: Any) -> Markup:
    """A form field's value (``|field``): the value itself, for the form to post back
    (``printable``'s escapes are for a reader: an id holding ESC, shown as ``\\x1b``,
    would come back as four other characters). HTML-escaped, and each character
    ``printable`` escapes written as a character reference, which a browser reads back
    as that character: the page's bytes still hold no raw ESC or bidi override. A C1
    control (U+0080 to U+009F) stays raw: HTML reads the reference of most of them as
    a Windows-1252 character. A lone surrogate (no character a browser can post)
    is written as its escape, as the links write it."""
    text = encodable(str(value))
    if printable(text) == text:
        return escape(text)
    return Markup("".join(
        char if "\x80" <= char <= "\x9f" else
        f"&#{ord(char)};" if printable(char) != char else str(escape(char))
        for char in text))


def is_loopback(address: str) -> bool:
    """Whether a host name or address can only mean this machine."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _first(query: Dict[str, List[str]], name: str) -> Optional[str]:
    """A query parameter's first value, None when it is not given."""
    values = query.get(name)
    return values[0] if values else None


def _whole(query: Dict[str, List[str]], name: str, default: int, least: int) -> int:
    """A whole-number parameter from ``least`` to LIST_LIMIT (400 otherwise)."""
    try:
        value = int((query.get(name) or [str(default)])[0])
    except ValueError:
        value = least - 1
    if not least <= value <= views.LIST_LIMIT:
        raise Response("400 Bad Request", f"{name} must be a whole number from {least} to "
                                          f"{views.LIST_LIMIT}")
    return value


def relative(iso: Optional[str], now: Optional[str] = None) -> str:
    """An ISO 8601 time as ``3 s ago`` or ``in 2 min``, from ``now`` (ISO; default:
    this machine's clock); '' for None. live.js writes the same words."""
    if not iso:
        return ""
    at = _dt.datetime.fromisoformat(iso)
    base = _dt.datetime.fromisoformat(now) if now else _dt.datetime.now(_dt.timezone.utc)
    seconds = (at - base).total_seconds()
    span = duration(abs(seconds))
    return "now" if span == "0 s" else (f"in {span}" if seconds > 0 else f"{span} ago")


def duration(seconds: Optional[float]) -> str:
    """Seconds as ``850 ms``, ``12 s``, ``4 min``, ``3 h`` or ``2 d``; '' for None."""
    if seconds is None:
        return ""
    if seconds < 1 and seconds != 0:
        return f"{round(seconds * 1000)} ms"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"
