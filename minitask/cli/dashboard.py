"""``minitask dashboard``: the web dashboard and ``/metrics`` of one app."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from typing import Any

from ..errors import ConfigurationError
from ..printable import own_logger
from .options import Bounded, add_app_options, load

logger = own_logger(__name__)

#: Where ``--auth`` is read from when the option is not given.
AUTH_ENV = "MINITASK_DASHBOARD_AUTH"
#: The signals that stop the dashboard, as they stop a worker.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Stopped(BaseException):
    """A stop signal, raised out of ``serve_forever`` (a BaseException: the server's
    handling of a request's error lets it through, as it does KeyboardInterrupt)."""


def _stop(signum: int, _frame: Any) -> None:
    raise _Stopped(f"{signal.Signals(signum).name} received")


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "dashboard", help="serve the web dashboard and /metrics",
        description="Serve the app's dashboard (queues, workers, throughput, tasks, dead "
        "letters, schedules) and Prometheus /metrics. Needs minitask[dashboard].")
    add_app_options(parser)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=Bounded(0, 65535), default=5555,
                        help="port (default 5555; 0: any free port)")
    parser.add_argument("--auth", default=None, metavar="USER:PASSWORD",
                        help=f"require HTTP basic auth (default: ${AUTH_ENV}, if set)")
    parser.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    auth = args.auth if args.auth is not None else os.environ.get(AUTH_ENV) or None
    if auth is not None:
        user, colon, password = auth.partition(":")
        if not colon or not user.strip() or not password.strip():
            # ':' or ' : ' would be "auth on" with a login anyone guesses
            raise ConfigurationError(f"--auth (or {AUTH_ENV}) must be user:password, with a "
                                     f"user and a password that are not empty or blank")
    try:
        from ..dashboard.server import make
    except ImportError as exc:
        raise ConfigurationError(f"the dashboard needs its extra: pip install "
                                 f"'minitask[dashboard]' ({exc})") from exc
    app = load(args.app)
    try:
        server = make(app, args.host, args.port, auth)
    except OSError as exc:  # the port is taken, or the address is not this machine's
        app.close()
        raise ConfigurationError(f"the dashboard cannot listen on {args.host}:{args.port}: "
                                 f"{exc.strerror or exc}; choose another --port or "
                                 f"--host") from exc
    logger.info("minitask dashboard of app %r on http://%s:%d/ (metrics at /metrics)%s",
                app.name, args.host, server.server_port,
                ", basic auth on" if auth else "")
    if args.host not in ("127.0.0.1", "localhost", "::1") and not auth:
        logger.warning("the dashboard listens on %s without --auth: anyone who reaches it "
                       "can requeue and purge dead letters", args.host)
    # SIGTERM's default ended the process at once: no last line, nothing closed
    previous = ({signum: signal.signal(signum, _stop) for signum in STOP_SIGNALS}
                if threading.current_thread() is threading.main_thread() else {})
    how, level = "its server ended", logging.INFO
    try:
        server.serve_forever()
    except _Stopped as stopped:
        how = str(stopped)
    except BaseException as exc:
        how, level = f"by {type(exc).__name__}: {exc}", logging.ERROR
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        server.server_close()
        app.close()
        logger.log(level, "minitask dashboard of app %r stopped (%s)", app.name, how)
    return 0
