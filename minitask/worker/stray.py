"""What Python writes to stderr on its own on behalf of the app's code, routed into the
worker's log, escaped.

Three things reach a worker's stderr without going through ``logging``: an exception
in a thread a task started (``threading.excepthook``), a warning
(``warnings.showwarning``) and an exception raised where Python can only ignore it, in
a ``__del__`` say (``sys.unraisablehook``). Python writes their texts raw: an escape
character or a newline in a message, a thread's name or a warning could move the
terminal and forge log lines. ``stray_output_logged`` makes each one log record
instead, its texts escaped (``printable``) and its traceback bounded and escaped
(``log_error``), in the worker's format (text or JSON), naming the task where it is
known: a record logged in a task's own thread or coroutine carries the task's name
and id (``cli.logs.TaskContextFilter`` adds them). A thread the task started is not
the task's: it is named by its own name, and by the task only when it runs in a copy
of the task's context (``contextvars.copy_context().run``).

``minitask worker`` installs it for its whole run (process-pool children are forked
with it); a program that runs workers itself may do the same around ``Worker.run``.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import threading
import warnings
from typing import Any, Iterator, List, Optional, TextIO

from ..printable import log_error, own_logger, printable, shown_name, shown_value

logger = own_logger(__name__)

_LOCK = threading.Lock()
#: Installs not yet undone, and the hooks they replaced (restored by the last undo).
_DEPTH = 0
_REPLACED: List[Any] = []


def _thread_failed(args: "threading.ExceptHookArgs") -> None:
    """An exception no code caught ended a thread: said as the default hook would say
    it (a SystemExit silently ends the thread), in one escaped log record."""
    if args.exc_type is SystemExit:
        return
    name = "?" if args.thread is None else printable(shown_name(str(args.thread.name)))
    said = "exception in thread %s (one the app's code started)"
    if isinstance(args.exc_value, BaseException):
        log_error(logger, logging.ERROR, said, name, error=args.exc_value)
    else:
        logger.error(said + ": %s", name, printable(args.exc_type.__name__))


def _show_warning(message: Any, category: Any, filename: str, lineno: int,
                  file: Optional[TextIO] = None, line: Optional[str] = None) -> None:
    """A warning, as one escaped log record ("FILE:LINE: Category: message"); one
    meant for a file of the caller's own (not stderr) is written there as before."""
    if file is not None and file is not sys.stderr:
        replaced = _REPLACED[1:2]
        if replaced:
            replaced[0](message, category, filename, lineno, file, line)
        else:  # undone meanwhile
            file.write(warnings.formatwarning(message, category, filename, lineno, line))
        return
    kind = getattr(category, "__name__", None) or shown_value(category)
    logger.warning("%s:%s: %s: %s", printable(filename), lineno, printable(kind),
                   printable(_text(message)))


def _text(message: Any) -> str:
    try:
        return str(message)
    except Exception as exc:  # the app's __str__, whatever it raises
        return f"<its text could not be read: {type(exc).__name__}>"


def _unraisable(args: Any) -> None:
    """An exception Python could only ignore (raised in ``__del__``, a callback of a
    weak reference...), as one escaped log record naming what raised it."""
    what = printable(args.err_msg or "Exception ignored in")
    where = shown_value(args.object)
    if isinstance(args.exc_value, BaseException):
        log_error(logger, logging.WARNING, "%s: %s", what, where, error=args.exc_value)
    else:
        logger.warning("%s: %s", what, where)


@contextlib.contextmanager
def stray_output_logged() -> Iterator[None]:
    """Within: a thread's uncaught exception, a warning and an exception Python can
    only ignore are each a log record, escaped, rather than raw text on stderr. The
    hooks replaced are put back as the outermost block ends (blocks may nest, and
    workers of one process may overlap)."""
    global _DEPTH
    with _LOCK:
        if _DEPTH == 0:
            _REPLACED[:] = [threading.excepthook, warnings.showwarning, sys.unraisablehook]
            threading.excepthook = _thread_failed
            warnings.showwarning = _show_warning
            sys.unraisablehook = _unraisable
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                threading.excepthook, warnings.showwarning, sys.unraisablehook = _REPLACED
                _REPLACED.clear()


__all__ = ["stray_output_logged"]
