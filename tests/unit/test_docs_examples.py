"""Every Python example in the docs and in README.rst runs, as written.

Each page's ``.. code-block:: python`` blocks run in order in one namespace (a page
tells one story). Every app the page makes is isolated on a private fakeredis
server (``minitask.testing.isolated``), whatever broker URL it names, and a
handle's ``get(timeout)`` (``join()`` for broadcasts) first drains every such
app in-process, moving its clock by the timeout: what a worker would have run
while the caller waited. After each block, the
apps' broadcast queues get the subscriber a worker started then would make. Two
reST comments, invisible in the
rendered page, steer a page:

``.. example-setup:`` followed by indented Python
    runs there, unseen (a stand-in for Django's ``transaction``, say).
``.. example-skip: REASON``
    the next block is not run: only for what is literally not runnable (a
    signature). Every skip names its reason, and ``MAX_SKIPS`` bounds them.

Examples that are whole programs live under ``examples/`` and are included
with ``literalinclude``; tests/integration/test_examples.py runs those.
"""
from __future__ import annotations

import asyncio
import re
import textwrap
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import fakeredis.aioredis
import pytest

from minitask import BroadcastHandle, GroupHandle, Minitask, TaskHandle
from minitask.testing import _subscribe, drain, isolated

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.rst"] + sorted(p for p in DOCS.rglob("*.rst") if "_build" not in p.parts)
#: blocks the docs may leave unrun, each with its reason (a signature, not code)
MAX_SKIPS = 3

DIRECTIVE = re.compile(r"^(\s*)\.\. (code-block:: python|example-setup:|example-skip:)(.*)$")

Block = Tuple[str, int, str]  # kind ("run", "setup", "skip"), line, source


def _body(lines: List[str], start: int, indent: int) -> Tuple[List[str], int]:
    """The indented body after line ``start`` (options and blank lines trimmed)."""
    body: List[str] = []
    i = start + 1
    while i < len(lines) and (not lines[i].strip() or
                              len(lines[i]) - len(lines[i].lstrip()) > indent):
        body.append(lines[i])
        i += 1
    while body and (not body[0].strip() or body[0].strip().startswith(":")):
        body.pop(0)
    return body, i


def blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = DIRECTIVE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, kind, rest = len(match.group(1)), match.group(2), match.group(3).strip()
        body, end = _body(lines, i, indent)
        source = textwrap.dedent("\n".join(body)).strip() + "\n"
        if kind == "example-skip:":
            assert rest, f"{page}:{i + 1}: an example-skip names its reason"
            yield "skip", i + 1, rest
        else:
            yield ("run" if kind.startswith("code") else "setup"), i + 1, source
        i = end


def _examples() -> List[Any]:
    params = []
    for page in PAGES:
        if any(kind == "run" for kind, _, _ in blocks(page)):
            params.append(pytest.param(page, id=str(page.relative_to(ROOT))))
    return params


class Harness:
    """Isolates every app made while a page runs, and drains them before a wait."""

    def __init__(self, stack: ExitStack, monkeypatch: pytest.MonkeyPatch) -> None:
        self.stack = stack
        self.apps: List[Minitask] = []
        original_init = Minitask.__init__

        def init(app: Minitask, *args: Any, **kwargs: Any) -> None:
            original_init(app, *args, **kwargs)
            self.stack.enter_context(isolated(app))
            # the async calls (adelay, aget...) reach the same in-memory server
            server = app._broker_setting.connection_pool.connection_kwargs["server"]
            monkeypatch.setattr(app, "_async_setting", fakeredis.aioredis.FakeRedis(server=server))
            self.apps.append(app)

        monkeypatch.setattr(Minitask, "__init__", init)
        for cls, name in ((TaskHandle, "get"), (GroupHandle, "get"),
                          (BroadcastHandle, "join"), (BroadcastHandle, "get")):
            monkeypatch.setattr(cls, name, self._draining(getattr(cls, name)))
        for cls, name in ((TaskHandle, "aget"), (BroadcastHandle, "ajoin")):
            monkeypatch.setattr(cls, name, self._adraining(getattr(cls, name)))

    def subscribe(self) -> None:
        """Subscribe as a worker starting now would, to the broadcast queues known now."""
        for app in self.apps:
            _subscribe(app)

    def drain(self, timeout: Any = None) -> None:
        """Run what a worker would have run while the caller waits up to ``timeout``
        seconds (a minute at most): what is ready, and what falls due meanwhile."""
        advance = min(float(timeout or 0), 60.0)
        for app in self.apps:
            drain(app, advance=advance)

    def _draining(self, wait: Callable[..., Any]) -> Callable[..., Any]:
        def waiting(handle: Any, *args: Any, **kwargs: Any) -> Any:
            self.drain(kwargs.get("timeout", args[0] if args else None))
            return wait(handle, *args, **kwargs)
        return waiting

    def _adraining(self, wait: Callable[..., Any]) -> Callable[..., Any]:
        async def waiting(handle: Any, *args: Any, **kwargs: Any) -> Any:
            timeout = kwargs.get("timeout", args[0] if args else None)
            await asyncio.to_thread(self.drain, timeout)  # async tasks run their own loop
            return await wait(handle, *args, **kwargs)
        return waiting


def test_the_pages_have_examples_and_few_skips() -> None:
    assert len(_examples()) >= 15
    skips = [(page, line) for page in PAGES for kind, line, _ in blocks(page) if kind == "skip"]
    assert len(skips) <= MAX_SKIPS, skips


@pytest.mark.parametrize("page", _examples())
def test_every_python_block_of_the_page_runs(page: Path, monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MINITASK_BROKER_URL", raising=False)
    namespace: Dict[str, Any] = {"__name__": "docs_" + page.stem.replace("-", "_")}
    skip_next = False
    with ExitStack() as stack:
        harness = Harness(stack, monkeypatch)
        for kind, line, source in blocks(page):
            if kind == "skip":
                skip_next = True
                continue
            if kind == "run" and skip_next:
                skip_next = False
                continue
            code = compile("\n" * (line - 1) + source, str(page), "exec")
            exec(code, namespace)
            harness.subscribe()
