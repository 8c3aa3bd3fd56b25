"""What ``minitask`` exports: a sorted ``__all__`` in step with the names bound in __init__."""
from __future__ import annotations

import ast
import builtins
import re
import types
from pathlib import Path
from typing import Any, Set, Tuple

import pytest

import minitask
from minitask import errors

INIT = Path(minitask.__file__)


def names_bound_in_init() -> Set[str]:
    """Every name ``__init__.py`` binds at top level, except __future__ features."""
    tree = ast.parse(INIT.read_text())
    bound: Set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            bound.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
    bound.discard("__all__")
    return bound


def test_all_is_sorted_and_has_no_duplicates() -> None:
    assert list(minitask.__all__) == sorted(minitask.__all__)
    assert len(set(minitask.__all__)) == len(minitask.__all__)


def test_all_lists_exactly_the_names_init_binds() -> None:
    assert set(minitask.__all__) == names_bound_in_init()


def test_all_lists_exactly_the_public_attributes_of_the_package() -> None:
    public = {name for name, value in vars(minitask).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)
              and not (name == "annotations" and type(value).__name__ == "_Feature")}
    assert public | {"__version__"} == set(minitask.__all__)


def test_every_name_in_all_resolves() -> None:
    for name in minitask.__all__:
        assert getattr(minitask, name) is not None, name


@pytest.mark.parametrize("name", [
    "Minitask", "Task", "TaskHandle", "current_task", "Retry", "TaskFailed",
    "TimeLimitExceeded", "BrokerError", "ResultTimeout", "EncodeError", "DecodeError",
    "ArgumentError", "ConfigurationError", "MessageTooLarge", "DuplicateTaskError",
    "AppNotFound", "UnknownTaskError", "SerializationError", "MinitaskError",
])
def test_names_the_spec_and_style_guide_promise_are_exported(name: str) -> None:
    assert name in minitask.__all__


def test_every_exception_class_of_errors_py_is_exported() -> None:
    defined = {name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, BaseException)
               and value.__module__ == errors.__name__}
    assert defined <= set(minitask.__all__)
    for name in defined:
        assert getattr(minitask, name) is getattr(errors, name)


@pytest.mark.parametrize("child,parents", [
    ("ConfigurationError", ("MinitaskError", ValueError)),
    ("DuplicateTaskError", ("ConfigurationError",)),
    ("AppNotFound", ("MinitaskError",)),
    ("ArgumentError", ("MinitaskError", TypeError)),
    ("SerializationError", ("MinitaskError",)),
    ("EncodeError", ("SerializationError", TypeError)),
    ("DecodeError", ("SerializationError",)),
    ("MessageTooLarge", ("MinitaskError", ValueError)),
    ("UnknownTaskError", ("MinitaskError",)),
    ("BrokerError", ("MinitaskError",)),
    ("TaskFailed", ("MinitaskError",)),
    ("TimeLimitExceeded", ("MinitaskError",)),
    ("ResultTimeout", ("MinitaskError", TimeoutError)),
    ("Retry", ("MinitaskError",)),
])
def test_exception_hierarchy_matches_the_style_guide(child: str, parents: Tuple[Any, ...]) -> None:
    cls = getattr(minitask, child)
    for parent in parents:
        base = getattr(minitask, parent) if isinstance(parent, str) else parent
        assert issubclass(cls, base), f"{child} should subclass {base.__name__}"


def test_no_exported_name_shadows_a_builtin() -> None:
    assert not set(minitask.__all__) & set(dir(builtins))


def test_version_is_a_release_string() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?(a|b|rc|dev|post)\d*)?", minitask.__version__)
