"""What a fixture's teardown can learn about the test it served."""
from __future__ import annotations

import pytest


def did_fail(request: pytest.FixtureRequest) -> bool:
    """In a fixture's teardown: whether the test's setup or call failed (to print logs).

    The reports are kept on the item by ``pytest_runtest_makereport`` in tests/conftest.py.
    """
    return any(getattr(getattr(request.node, f"report_{when}", None), "failed", False)
               for when in ("setup", "call"))
