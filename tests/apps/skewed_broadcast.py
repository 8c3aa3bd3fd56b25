"""tests.apps.broadcast served by a worker whose clock runs ``TEST_CLOCK_AHEAD_S``
seconds ahead of the machine's (tests.apps.clock_ahead shifts it, before the worker
reads any time)."""
from __future__ import annotations

import tests.apps.clock_ahead  # noqa: F401  (the clock shifted first)
from tests.apps.broadcast import app

__all__ = ["app"]
