"""No log call of minitask raises: its loggers are ``ContainedLogger``s
(``printable.own_logger``). A handler that raised (the app's log shipper down, logging's
own ``handleError`` once a task closed ``sys.stderr``) raised out of the worker's log
calls on the outcome path and left tasks running for ever (the worker's side is
tests/crash/test_what_user_code_breaks_never_holds_a_task.py)."""
from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Iterator, List

import pytest

import minitask
from minitask.printable import ContainedLogger, dropped_records, own_logger

PACKAGE = Path(minitask.__file__).resolve().parent


class Raising(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        raise ConnectionError("log shipper down")


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def root_handlers() -> Iterator[Kept]:
    """A raising handler on the root logger, ahead of one that keeps what it gets."""
    root, kept, raising = logging.getLogger(), Kept(), Raising()
    root.addHandler(raising)
    root.addHandler(kept)
    try:
        yield kept
    finally:
        root.removeHandler(raising)
        root.removeHandler(kept)


def test_a_raising_handler_loses_only_its_own_copy_and_is_counted(root_handlers: Kept) -> None:
    logger = own_logger("minitask.tests.contained")
    before = dropped_records()
    logger.error("task %s failed", "abc")
    logger.warning("and %s", "again")
    assert [r.getMessage() for r in root_handlers.records] == ["task abc failed", "and again"]
    assert dropped_records() == before + 2


def test_a_handler_writing_to_a_closed_stderr_raises_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    closed = open(Path(__file__), encoding="utf-8")  # noqa: SIM115 - closed at once
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)  # logging's handleError writes here
    handler = logging.StreamHandler(closed)
    logger = own_logger("minitask.tests.closed")
    logger.addHandler(handler)
    try:
        before = dropped_records()
        logger.error("said to nobody")
        assert dropped_records() == before + 1
    finally:
        logger.removeHandler(handler)


def test_a_filter_that_raises_raises_nothing() -> None:
    logger = own_logger("minitask.tests.filtered")

    def broken(record: logging.LogRecord) -> bool:
        raise RuntimeError("a filter of the app's")

    logger.addFilter(broken)
    try:
        logger.error("filtered")
    finally:
        logger.removeFilter(broken)


def test_a_record_with_no_handler_goes_to_the_last_resort(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kept = Kept()
    monkeypatch.setattr(logging, "lastResort", kept)
    logger = own_logger("minitask.tests.alone")
    logger.propagate = False
    try:
        logger.warning("last resort")
    finally:
        logger.propagate = True
    assert [r.getMessage() for r in kept.records] == ["last resort"]


def test_the_app_s_logger_class_is_kept() -> None:
    class Custom(logging.Logger):
        pass

    previous = logging.getLoggerClass()
    logging.setLoggerClass(Custom)
    try:
        logger = own_logger("minitask.tests.custom")
    finally:
        logging.setLoggerClass(previous)
    assert isinstance(logger, Custom) and isinstance(logger, ContainedLogger)
    assert own_logger("minitask.tests.custom") is logger is logging.getLogger(
        "minitask.tests.custom")


def test_every_module_of_minitask_gets_its_logger_contained() -> None:
    """One place contains every log call: a module that asked ``logging.getLogger`` for
    its logger (or logged on the root logger, ``logging.warning(...)``) would write
    records that can raise into it."""
    asking = re.compile(r"logging\.(getLogger|debug|info|warning|error|exception|critical|"
                        r"log)\(")
    found = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                   if path.name != "printable.py" and asking.search(path.read_text()))
    assert not found, f"use printable.own_logger(__name__) in {found}"


def test_the_worker_s_handler_goes_on_past_a_closed_stderr(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """``minitask worker``'s handler: a task that closed ``sys.stderr`` silenced the
    worker's log for good; it writes to file descriptor 2 on a stream of its own."""
    from minitask.cli.logs import handler

    closed = open(Path(__file__), encoding="utf-8")  # noqa: SIM115 - closed at once
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    made = handler("text")
    logger = own_logger("minitask.tests.worker_log")
    logger.addHandler(made)
    try:
        before = dropped_records()
        logger.error("still said")
        assert dropped_records() == before
    finally:
        logger.removeHandler(made)
    assert "still said" in capfd.readouterr().err


def test_a_handler_whose_close_raises_keeps_no_process_from_ending_past_leftovers() -> None:
    """``exit_past_leftovers`` flushes every handler before ``os._exit``: one of the
    app's whose close raised kept the process alive, waiting on the threads it left."""
    import subprocess

    script = (
        "import logging, threading, time\n"
        "from minitask.worker.leftovers import exit_past_leftovers\n"
        "class Shut(logging.Handler):\n"
        "    def emit(self, record): pass\n"
        "    def close(self): raise RuntimeError('log shipper down')\n"
        "logging.getLogger().addHandler(Shut())\n"
        "threading.Thread(target=time.sleep, args=(60,)).start()\n"
        "exit_past_leftovers(3, wait=0.1)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30,
                          cwd=PACKAGE.parent)
    assert done.returncode == 3, done.stderr.decode(errors="replace")
