"""What every store is: a transport to talk through, its app's keys, its scripts."""
from __future__ import annotations

import functools
from typing import Callable, Tuple

from ..broker.keys import AppKeys, QueueKeys, queue_keys
from ..broker.transport import Transport
from .bounds import Bounds
from .scripts import source

#: Queues whose keys a store keeps made for its hot calls (a fetch's, an ack's), at most.
KEPT_QUEUES = 4096


class Store:
    """One concern's operations on one app's Redis; registers its scripts when made."""

    #: The scripts (``stores/lua/<name>.lua``) this store runs.
    scripts: Tuple[str, ...] = ()
    #: A library its scripts share (``stores/lua/<library>.lua``), if any.
    library = ""
    #: The longest value of each kind its reads read (the app's, ``Broker.bound``).
    bounds = Bounds()

    def __init__(self, transport: Transport, app_name: str) -> None:
        self.transport = transport
        self.app_name = app_name
        self.app_keys = AppKeys(app_name)
        #: ``keys``, as a partial of the cached function: no call of Python (hot calls')
        self.keys_of: Callable[[str], QueueKeys] = functools.partial(queue_keys, app_name)
        for name in self.scripts:
            transport.register(name, source(name, shared=self.library))

    def keys(self, queue: str) -> QueueKeys:
        """The keys of ``queue`` of this store's app, built once and shared."""
        return queue_keys(self.app_name, queue)
