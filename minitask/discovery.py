"""Find the app named by ``-A`` and import the task modules plugins add to it."""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any, List, Optional

from ._compat import EntryPoint, entry_points_of
from .app import Minitask
from .errors import AppNotFound, ConfigurationError

APPS_GROUP = "minitask.apps"
TASKS_GROUP = "minitask.tasks"


def load_app(spec: str, option: str = "-A") -> Minitask:
    """Resolve ``-A``: an entry point of ``minitask.apps``, ``module`` or ``module:attr``.
    ``option`` is how the user gave ``spec`` (``-A``, or the pytest plugin's ini
    option), for the errors.

    Raises:
        AppNotFound: nothing by that name, a module with no or several apps, or a
            spec that is not a module name (a path, a file name, a relative name):
            refused before anything is imported.
    """
    for entry_point in entry_points_of(APPS_GROUP):
        if entry_point.name == spec:
            return _check(_loaded(entry_point), f"entry point {spec!r} ({entry_point.value})")
    module_name, _, attribute = spec.partition(":")
    _check_spec(spec, module_name, attribute, option)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            hint = " (for a file, drop '.py')" if module_name.endswith(".py") else ""
            raise AppNotFound(f"{option} {spec!r}: no entry point in group {APPS_GROUP!r} and no "
                              f"module {module_name!r} on the path{hint}") from None
        raise
    if attribute:
        found: Any = module
        for part in attribute.split("."):
            if not hasattr(found, part):
                raise AppNotFound(f"{option} {spec!r}: module {module_name!r} has no {attribute!r}")
            found = getattr(found, part)
        return _check(found, f"{option} {spec!r}")
    apps = {name: value for name, value in vars(module).items() if isinstance(value, Minitask)}
    if len(apps) == 1:
        return next(iter(apps.values()))
    if not apps:
        raise AppNotFound(f"{option} {spec!r}: module {module_name!r} holds no Minitask app; name "
                          f"one with {module_name}:attribute")
    raise AppNotFound(f"{option} {spec!r}: module {module_name!r} holds several apps "
                      f"({', '.join(sorted(apps))}); pick one with {module_name}:attribute")


def _loaded(entry_point: EntryPoint) -> Any:
    """What an entry point of ``minitask.apps`` names; a module missing as it loads (its
    own, left by an uninstalled or moved package, or one it imports) is said in one
    line naming the entry point, its distribution and that module, not a traceback."""
    try:
        return entry_point.load()
    except ModuleNotFoundError as exc:
        module, missing = entry_point.module, exc.name or str(exc)
        dist = entry_point.dist
        owner = (f"distribution {dist.name!r} {dist.version}" if dist is not None
                 else "an unknown distribution")
        if missing == module or module.startswith(missing + "."):
            why = (f"its module {module!r} is not installed (reinstall the distribution, "
                   f"or uninstall it if the app moved)")
        else:
            why = f"its module {module!r} imports {missing!r}, which is not installed"
        raise AppNotFound(f"entry point {entry_point.name!r} of group {APPS_GROUP!r} "
                          f"({entry_point.value}, from {owner}): {why}") from exc


def _check_spec(spec: str, module_name: str, attribute: str, option: str) -> None:
    """Refuse, before importing anything, a spec that names no module and attribute."""
    where = f"{option} {spec!r}:"
    if not module_name:
        raise AppNotFound(f"{where} name a module ({option} shop.tasks, or {option} "
                          f"shop.tasks:app) or an entry point of group {APPS_GROUP!r}")
    if "/" in module_name or "\\" in module_name:
        guess = _module_of_path(module_name)
        hint = (f"did you mean {option} {guess}{':' if attribute else ''}{attribute}?" if guess
                else "run minitask from the directory that holds your package and give "
                     "its dotted name")
        raise AppNotFound(f"{where} {option} takes a module name, not a file path; {hint}")
    if module_name.startswith("."):
        bare = module_name.lstrip(".")
        hint = f"give the absolute name, e.g. {option} {bare}" if _is_dotted(bare) else (
            "give the absolute, dotted name of the module")
        raise AppNotFound(f"{where} relative module names are not supported; {hint}")
    if module_name.endswith(".py") and _is_dotted(module_name[:-3]):
        stem = module_name[:-3]
        if not _is_package(stem):  # only a package can hold a submodule named "py"
            raise AppNotFound(f"{where} {option} takes a module name, not a file name: drop '.py' "
                              f"({option} {stem}{':' if attribute else ''}{attribute})")
    if not _is_dotted(module_name):
        raise AppNotFound(f"{where} {module_name!r} is not a module name (dotted Python "
                          f"identifiers, e.g. shop.tasks), and no entry point of group "
                          f"{APPS_GROUP!r} has that name")
    if ":" in spec and not _is_dotted(attribute):
        raise AppNotFound(f"{where} name the attribute after ':' with dotted Python "
                          f"identifiers (e.g. {module_name}:app), not {attribute!r}")


def _is_dotted(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def _module_of_path(path: str) -> Optional[str]:
    """``pkg/app.py`` -> ``pkg.app``; None for a path that leaves the current directory."""
    parts = [part for part in path.replace("\\", "/").split("/") if part not in ("", ".")]
    if path.startswith(("/", "\\")) or ".." in parts or not parts:
        return None
    if parts[-1].endswith(".py"):
        parts[-1] = parts[-1][:-3]
    name = ".".join(parts)
    return name if _is_dotted(name) else None


def _is_package(name: str) -> bool:
    """Whether ``name`` is a package; finding it imports its parents, not the module."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.submodule_search_locations is not None


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
