"""What every store is: a transport to talk through, its app's keys, its scripts."""
from __future__ import annotations

from typing import Tuple

from ..broker.keys import AppKeys, QueueKeys, queue_keys
from ..broker.transport import Transport
from .bounds import Bounds
from .scripts import source


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
        for name in self.scripts:
            transport.register(name, source(name, shared=self.library))

    def keys(self, queue: str) -> QueueKeys:
        """The keys of ``queue`` of this store's app, built once and shared."""
        return queue_keys(self.app_name, queue)
