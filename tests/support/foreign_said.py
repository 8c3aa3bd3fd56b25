"""What this process said of data minitask did not write (``stores.foreign``), forgotten
for one test: an earlier test's plant in the same key would hold back a line it looks for."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

from minitask.log_throttle import LogThrottle
from minitask.stores import foreign


def said_afresh(monkeypatch: pytest.MonkeyPatch, **pace: Any) -> None:
    """Forget the pairs said (``SAID_PAIRS``) and each key's lines this window
    (``KEY_LINES`` a ``KEY_WINDOW_S``); ``pace``: the keys' throttle set otherwise
    (``clock=``, ``lines=``)."""
    monkeypatch.setattr(foreign, "_SAID", OrderedDict())
    monkeypatch.setattr(foreign, "_KEYS", LogThrottle(**{
        "every": foreign.KEY_WINDOW_S, "lines": foreign.KEY_LINES, "keys": foreign.SAID_PAIRS,
        **pace}))
