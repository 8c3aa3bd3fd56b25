"""Log records that say which task they come from, as text or as JSON.

A record logged inside a task (by minitask or by the task's own code, with
any logger) gets ``task_id`` and ``task_name`` from ``current_task()``; outside
a task they are what the call passed in ``extra`` (the worker's lines about an
outcome do), else empty strings, so a format string can always name them.
This is a handler filter, not a logger filter: a logger's filter would only
see records of that one logger, and tasks log through their own.

``minitask`` (the command) installs all of this on its handler; a program
that runs workers itself adds ``TaskContextFilter`` to its own handlers.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
from typing import Any, Dict

from ..context import current_task
from ..printable import ERROR_TRACE_MOST, cut_text, escaped_trace, json_safe, printable

#: The text format: the task's name and id appear only on records from inside a task.
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(task_prefix)s%(message)s"

#: Attributes every LogRecord has; anything else a caller passed in ``extra`` goes to JSON.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "task_id", "task_name", "task_prefix", "trace_escaped"}


class TaskContextFilter(logging.Filter):
    """Adds ``task_id``, ``task_name`` and ``task_prefix`` to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = current_task()
        if context is None:  # the worker's own lines about a task name it in ``extra``
            record.task_id = getattr(record, "task_id", "")
            record.task_name = getattr(record, "task_name", "")
            record.task_prefix = ""
        else:
            record.task_id, record.task_name = context.id, context.name
            record.task_prefix = f"[{context.name} {context.id}] "
        return True


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT``, one record per line: a task id, a queue name or an error
    message read from Redis is escaped (``printable``), so that it can neither move
    the terminal nor forge a log line of its own. The traceback keeps its lines, and
    each exception's own text in it (the line naming its type, of every exception of
    the chain) is escaped like the message."""

    def format(self, record: logging.LogRecord) -> str:
        """As logging formats it, but a traceback another handler's formatter cached on
        the record (``exc_text``, raw: the app's own handler, say) is formatted again,
        escaped; ``log_error``'s own (escaped, bounded) is kept."""
        if record.exc_info and record.exc_info[1] is not None and record.exc_text \
                and not getattr(record, "trace_escaped", False):
            record.exc_text = None
        return super().format(record)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = printable(record.message)
        record.task_prefix = printable(getattr(record, "task_prefix", ""))
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        if ei[1] is None:
            return super().formatException(ei)
        return escaped_trace(ei[0], ei[1], ei[2])


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, the
    task's id and name, the exception's traceback, and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: Dict[str, Any] = {
            "time": _dt.datetime.fromtimestamp(record.created, _dt.timezone.utc)
            .isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "task_id": getattr(record, "task_id", ""),
            "task_name": getattr(record, "task_name", ""),
        }
        if record.exc_info:
            entry["traceback"] = record.exc_text or cut_text(
                self.formatException(record.exc_info), ERROR_TRACE_MOST)
        elif record.exc_text:  # a traceback formatted (and bounded) already: log_error's
            entry["traceback"] = record.exc_text
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in entry:
                entry[name] = value if isinstance(value, (str, int, float, bool)) else repr(value)
        # a lone surrogate (text read from Redis) as its JSON escape: stderr is UTF-8
        return json_safe(json.dumps(entry, ensure_ascii=False))


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it was when made; once that stream is closed (the app's
    code called ``sys.stderr.close()``), to a stream of its own on file descriptor 2,
    which closing ``sys.stderr`` leaves open: the worker's log goes on."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self.stream, "closed", False):  # not setStream: it flushes the old one
            self.stream = open(2, "w", encoding="utf-8", errors="backslashreplace",
                               closefd=False)
        super().emit(record)


def handler(log_format: str = "text") -> logging.Handler:
    """A stderr handler with the task filter and the ``text`` or ``json`` format."""
    if log_format not in ("text", "json"):
        raise ValueError(f"log format must be 'text' or 'json', got {log_format!r}")
    stream = StderrHandler()
    stream.addFilter(TaskContextFilter())
    stream.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter(TEXT_FORMAT))
    return stream
