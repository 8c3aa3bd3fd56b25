"""Find the app named by ``-A`` and import the task modules plugins add to it."""
from __future__ import annotations

import importlib
from typing import Any, List

from ._compat import entry_points_of
from .app import Minitask
from .errors import AppNotFound, ConfigurationError

APPS_GROUP = "minitask.apps"
TASKS_GROUP = "minitask.tasks"


def load_app(spec: str) -> Minitask:
    """Resolve ``-A``: an entry point of ``minitask.apps``, ``module`` or ``module:attr``.

    Raises:
        AppNotFound: nothing by that name, or a module with no or several apps.
    """
    for entry_point in entry_points_of(APPS_GROUP):
        if entry_point.name == spec:
            return _check(entry_point.load(), f"entry point {spec!r} ({entry_point.value})")
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            raise AppNotFound(f"-A {spec!r}: no entry point in group {APPS_GROUP!r} and no "
                              f"module {module_name!r} on the path") from None
        raise
    if attribute:
        found: Any = module
        for part in attribute.split("."):
            if not hasattr(found, part):
                raise AppNotFound(f"-A {spec!r}: module {module_name!r} has no {attribute!r}")
            found = getattr(found, part)
        return _check(found, f"-A {spec!r}")
    apps = {name: value for name, value in vars(module).items() if isinstance(value, Minitask)}
    if len(apps) == 1:
        return next(iter(apps.values()))
    if not apps:
        raise AppNotFound(f"-A {spec!r}: module {module_name!r} holds no Minitask app; name "
                          f"one with {module_name}:attribute")
    raise AppNotFound(f"-A {spec!r}: module {module_name!r} holds several apps "
                      f"({', '.join(sorted(apps))}); pick one with {module_name}:attribute")


def load_task_plugins(app: Minitask) -> List[str]:
    """Import every ``minitask.tasks`` entry point named after the app; returns their modules.

    Raises:
        ConfigurationError: a plugin's module failed to import.
    """
    loaded = []
    for entry_point in entry_points_of(TASKS_GROUP):
        if entry_point.name != app.name:
            continue
        try:
            entry_point.load()
        except Exception as exc:
            raise ConfigurationError(f"task plugin {entry_point.value!r} for app {app.name!r} "
                                     f"failed to import: {type(exc).__name__}: {exc}") from exc
        loaded.append(entry_point.value)
    return loaded


def _check(value: Any, where: str) -> Minitask:
    if not isinstance(value, Minitask):
        raise AppNotFound(f"{where} is {value!r}, not a Minitask app")
    return value
