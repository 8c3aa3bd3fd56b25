"""A TaskFailed's text shows the remote error escaped (``printable``); its attributes keep
it as recorded. Before, an uncaught TaskFailed or a producer's ``logger.exception``
printed a remote message's newline (a forged "ERROR" log line), ``\\r`` and terminal
escape sequences raw; so did a workflow step's "not run: step X ... ended dead: ..."."""
from __future__ import annotations

import logging
import sys
from typing import Callable

import pytest

from minitask import Minitask, TaskFailed, chain
from tests.support.draining import drain

HOSTILE = "no account\nERROR minitask forged line\x1b[31m\x1b]0;title\x07\rred"


def _raw_free(text: str) -> None:
    for char in ("\n", "\r", "\x1b", "\x07"):
        assert char not in text, (char, text)


def test_its_text_escapes_the_remote_error_and_its_attributes_keep_it() -> None:
    error = TaskFailed("id\x1b1", "Value\nError", HOSTILE, "Traceback\n  line\x1b[2J\n")
    text = str(error)
    _raw_free(text)
    assert text == ("task id\\x1b1 failed: Value\\x0aError: no account\\x0aERROR minitask "
                    "forged line\\x1b[31m\\x1b]0;title\\x07\\x0dred")
    assert (error.task_id, error.exc_type, error.message) == ("id\x1b1", "Value\nError",
                                                              HOSTILE)
    assert error.traceback == "Traceback\n  line\x1b[2J\n"
    _raw_free(repr(error))


def test_a_failed_task_and_the_step_not_run_after_it_print_escaped(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("hostile")

    @app.task(name="hostile.boom")
    def boom(text: str) -> int:
        raise ValueError(text)

    @app.task(name="hostile.then")
    def then(value: int) -> int:
        return value

    handle = boom.delay(HOSTILE)
    steps = chain(boom.s(HOSTILE), then.s()).delay()
    drain(app.worker(["default"]))
    for waited in (handle, steps):
        with pytest.raises(TaskFailed) as failed:
            waited.get(timeout=5)
        _raw_free(str(failed.value))
        assert "ERROR minitask forged line\\x1b[31m" in str(failed.value)
        assert failed.value.exc_type == "ValueError"
        assert HOSTILE in failed.value.message  # kept as recorded
    assert str(failed.value).startswith(f"task {failed.value.task_id} failed: ValueError: "
                                        f"not run: step ")

    # what a producer's logger.exception writes: the escaped text, on one line
    try:
        handle.get(timeout=5)
    except TaskFailed:
        record = logging.LogRecord("producer", logging.ERROR, __file__, 1, "get failed", (),
                                   sys.exc_info())
    written = logging.Formatter("%(levelname)s %(message)s").format(record)
    last = written.splitlines()[-1]
    assert last.startswith("minitask.errors.TaskFailed: task ") and "\\x0aERROR" in last
    assert not any(line.startswith("ERROR minitask forged") for line in written.splitlines())
    assert "\x1b" not in written and "\r" not in written
