"""The minitask pytest plugin: the app named by the ``minitask_app`` ini option is
isolated in every test (``minitask.testing.isolated``) and offered as the fixture
``minitask_app``.

::

    # pytest.ini (or [tool:pytest] in setup.cfg, [tool.pytest.ini_options] ...)
    [pytest]
    minitask_app = shop.tasks:app

    # test_emails.py
    from minitask.testing import drain
    from shop.tasks import send_receipt

    def test_receipt(minitask_app):
        handle = send_receipt.delay(1001, "ann@example.com")
        drain(minitask_app, advance=5)
        assert handle.status() == "succeeded"

Every test is isolated, whether it asks for the fixture or not, so a test can
never enqueue into a real broker by accident. Installed with
``pip install "minitask[testing]"`` (entry point ``pytest11``).
"""
from __future__ import annotations

import sys
from typing import Iterator, Optional

import pytest

from .app import Minitask
from .discovery import load_app, load_task_plugins
from .errors import MinitaskError
from .testing import isolated

INI_OPTION = "minitask_app"

_APP = pytest.StashKey[Optional[Minitask]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(INI_OPTION, default="",
                  help="the minitask app to isolate in every test: package.module:app (or "
                       "package.module, or an entry point of minitask.apps)")


def pytest_configure(config: pytest.Config) -> None:
    """Load the configured app before any test runs: a wrong name stops the session
    at once with a usage error, not each test with the same failure.

    This runs before pytest puts any test's folder on the path, and the ``pytest``
    command (unlike ``python -m pytest``) puts no current directory there: so the
    directory pytest was started from and the one holding the ini file come first,
    as the ``minitask`` command's current directory does for ``-A``."""
    spec = str(config.getini(INI_OPTION) or "").strip()
    app = None
    if spec:
        for folder in {str(config.rootpath): None, str(config.invocation_params.dir): None}:
            if folder not in sys.path:
                sys.path.insert(0, folder)
        try:
            app = load_app(spec, f"{INI_OPTION} =")
            load_task_plugins(app)
        except MinitaskError as exc:
            raise pytest.UsageError(str(exc)) from exc
    config.stash[_APP] = app


def _app(config: pytest.Config) -> Optional[Minitask]:
    """The configured app (None when the option is not set)."""
    return config.stash.get(_APP, None)


@pytest.fixture(autouse=True)
def _minitask_isolation(request: pytest.FixtureRequest) -> Iterator[Optional[Minitask]]:
    """Every test runs with the configured app on a private in-memory broker."""
    app = _app(request.config)
    if app is None:
        yield None
        return
    with isolated(app):
        yield app


@pytest.fixture
def minitask_app(_minitask_isolation: Optional[Minitask]) -> Minitask:
    """The app named by the ``minitask_app`` ini option, isolated for this test."""
    if _minitask_isolation is None:
        pytest.fail(f"the minitask_app fixture needs the ini option {INI_OPTION}: add "
                    f"'{INI_OPTION} = package.module:app' to the [pytest] section of your "
                    f"pytest.ini (or to your setup.cfg / pyproject.toml pytest settings)",
                    pytrace=False)
    return _minitask_isolation
