"""The app's live workers, and stopping them from afar."""
from __future__ import annotations

import time
from typing import Dict, List, Sequence

from ..errors import ConfigurationError
from ..stores.registry import SHUTDOWN
from .operated import Operated

#: A worker whose last heartbeat is older than this is not live.
LIVE_MS = 60_000


def live_workers(app: Operated) -> List[Dict[str, str]]:
    """The app's workers whose heartbeat is recent, each a dict with its ``name``."""
    return app.broker.registry.live(int(time.time() * 1000), LIVE_MS)


def shutdown(app: Operated, names: Sequence[str] = (), *, every: bool = False) -> List[str]:
    """Ask live workers to stop as on SIGTERM: they stop fetching, give running tasks
    their grace and exit; each acts on it at once (it waits on Redis for orders).

    Args:
        names: the workers to stop, as ``minitask status`` lists them.
        every: stop every live worker of the app instead.

    Returns:
        The names of the workers asked.

    Raises:
        ConfigurationError: no name and not ``every``, or a name that is no live worker
            (nothing is sent then).
        BrokerError: Redis could not be reached.
    """
    live = [info["name"] for info in live_workers(app)]
    if every:
        names = live
    elif not names:
        raise ConfigurationError("name the workers to stop (see minitask status), or pass --all")
    unknown = [name for name in names if name not in live]
    if unknown:
        raise ConfigurationError(
            f"no live worker of app {app.name!r} is named {', '.join(map(repr, unknown))}; "
            f"live workers: {', '.join(live) or 'none'}")
    for name in names:
        app.broker.registry.send_order(name, SHUTDOWN)
    return list(names)
