"""``printable``: the one way a string read from Redis reaches a terminal, a log
line or a page.

Queue, worker and subscriber names, task ids, exception and progress messages
are all data someone may have planted in Redis. Printed raw, an escape
character can rewrite the terminal and a newline can forge a log line. Every
such string goes through ``printable`` first: what is printable stays as it
is, and nothing else can reach the reader unescaped.
"""
from __future__ import annotations

import collections.abc
import logging
import os
import re
import reprlib
import threading
import traceback
from typing import Any, Dict, Iterator, List, Optional, Set

#: Characters that are printable but move or reorder text: line and paragraph
#: separators, and the bidirectional controls that can make a name read backwards.
_MOVING = frozenset("\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                    "\u2066\u2067\u2068\u2069\u061c")


def _escaped(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(value: Any, *, keep_newlines: bool = False) -> str:
    """``value`` as text safe to print: bytes are read as UTF-8 (a byte that is not
    shows as ``\\xNN``), and every control character (C0, DEL, C1, separators,
    bidirectional controls, surrogates) as its ``\\x`` / ``\\u`` escape.

    Args:
        value: a str, bytes, or anything ``str()`` can show.
        keep_newlines: leave ``\\n`` as it is (a traceback shown on lines of
            its own); every other control character is still escaped.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        shown = bytes(value).decode("utf-8", "backslashreplace")
    else:
        shown = value if isinstance(value, str) else str(value)
    if shown.isprintable() and not _MOVING.intersection(shown):
        return shown
    return "".join(
        char if (char.isprintable() and char not in _MOVING)
        or (keep_newlines and char == "\n") else _escaped(char)
        for char in shown)


class SafeRepr(reprlib.Repr):
    """``reprlib.Repr`` that shows an int too long for ``repr`` (Python refuses one
    of more than ``sys.get_int_max_str_digits()`` digits with a ValueError) by its
    size: an error message about a user's huge int must not fail with Python's own."""

    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:
            return f"<an int of {x.bit_length():,} bits>"


#: ``reprlib.repr`` (its limits), safe from huge ints: how a refused argument is shown.
short_repr = SafeRepr().repr

#: How ``shown_value`` shows a value read from Redis: a few levels, items and characters
#: of it. A planted value may be nested a thousand levels deep (``repr`` of it raises
#: RecursionError) or hold megabytes.
_BOUNDED = SafeRepr()
_BOUNDED.maxlevel = 4
_BOUNDED.maxstring = _BOUNDED.maxother = _BOUNDED.maxlong = 80
#: The most characters of a value read from Redis that a message shows.
VALUE_SHOWN_MOST = 100


def shown_value(value: Any, most: int = VALUE_SHOWN_MOST) -> str:
    """``repr(value)`` of a value read from Redis, bounded (a few levels deep, long
    strings and containers cut short, at most ``most`` characters) and escaped
    (``printable``): the one way such a value reaches an error message or a page. It
    never raises, however deep or large the value."""
    try:
        shown = _BOUNDED.repr(value)
    except Exception:  # an extension type's own repr, whatever it raises
        shown = f"<a {type(value).__name__} that cannot be shown>"
    shown = printable(shown)
    return shown if len(shown) <= most else shown[:most - 3] + "..."


def nests_past(value: Any, most: int) -> bool:
    """Whether ``value`` (read from Redis: lists, tuples, dicts and scalars) nests
    containers more than ``most`` levels deep, walked without recursion. A reader that
    shows such a value whole (``repr``, ``json.dumps``, a template) would raise
    RecursionError: it shows ``shown_value`` of it instead."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            parts: Any = [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple)):
            parts = item
        else:
            continue
        if depth > most:
            return True
        pending.extend((part, depth + 1) for part in parts
                       if isinstance(part, (dict, list, tuple)))
    return False


def encodable(value: str) -> str:
    """``value`` with each lone surrogate (half of a UTF-16 pair, which UTF-8 cannot
    carry) as its backslash escape, every other character as it is: text that can
    be written as UTF-8 (a URL, a form field, JSON) however it was read. A JSON
    ``\\udc80`` in Redis decodes to such a character; escaped, JSON reads it back."""
    if value.isascii():
        return value
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def json_safe(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with every character that is
    not printable (C0, DEL, C1, line and paragraph separators, bidirectional and other
    format controls, lone surrogates) as its JSON escape, ``\\u`` and four hex digits
    (``\\u202e``; a pair for one beyond U+FFFF): the same JSON to a parser, and
    nothing that can move, reorder or rewrite what a terminal shows; printable text
    (accented letters, CJK) stays as it is. Outside strings JSON holds only printable
    ASCII, spaces and newlines."""
    if text.isprintable() or text.isascii() and "\x7f" not in text:
        return text  # the usual case; ensure_ascii=False escapes C0 itself
    out: List[str] = []
    for char in text:
        if char.isprintable() or char == "\n":
            out.append(char)
        else:
            units = char.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}"
                       for i in range(0, len(units), 2))
    return "".join(out)


def readable(value: Any) -> bool:
    """Whether ``value`` (str or bytes) is text ``printable`` leaves as it is: UTF-8,
    with no control character. A name read from Redis that is not is someone else's."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return isinstance(value, str) and printable(value) == value


_WIDTHS = {"x": 2, "u": 4, "U": 8}


def typed_back(shown: str) -> List[bytes]:
    """What a name ``printable`` showed as ``shown`` may be in Redis, most likely
    first: ``shown`` itself, then with each ``\\x``/``\\u``/``\\U`` escape read
    back as its character, then with each ``\\xNN`` of 80 to ff read as the raw
    byte (a name that is not UTF-8). A person copies an escaped id from ``minitask
    dead list`` and types it back: this is how the command finds it again."""
    as_text, as_bytes = bytearray(), bytearray()
    index = 0
    while index < len(shown):
        char = shown[index]
        width = _WIDTHS.get(shown[index + 1:index + 2], 0) if char == "\\" else 0
        digits = shown[index + 2:index + 2 + width]
        if width and len(digits) == width and all(d in "0123456789abcdefABCDEF"
                                                  for d in digits):
            code = int(digits, 16)
            try:
                as_text += chr(code).encode("utf-8", "surrogatepass")
            except (ValueError, OverflowError):  # beyond U+10FFFF: no character
                as_text += shown[index:index + 2 + width].encode()
            as_bytes += (bytes([code]) if width == 2 and code >= 0x80
                         else chr(min(code, 0x10FFFF)).encode("utf-8", "surrogatepass"))
            index += 2 + width
            continue
        as_text += char.encode("utf-8", "surrogatepass")
        as_bytes += char.encode("utf-8", "surrogatepass")
        index += 1
    found: List[bytes] = []
    for form in (shown.encode("utf-8", "surrogatepass"), bytes(as_text), bytes(as_bytes)):
        if form not in found:
            found.append(form)
    return found


#: What ``error_text`` says of an exception whose text cannot be read.
UNREADABLE = "its text could not be read"
#: The most characters of an error's text and of its traceback a worker keeps (in the
#: result, the dead letter, a retry's note and what shows them): a task raising a
#: 20 MB message made each of those 20 MB, and the dashboard's task page 40 MB.
ERROR_TEXT_MOST = 65_536
ERROR_TRACE_MOST = 131_072


def cut_text(text: str, most: int) -> str:
    """``text``, or its head and tail around a note of how long it was."""
    if len(text) <= most:
        return text
    half = most // 2
    return f"{text[:half]} ... [cut: {len(text):,} characters in all] ... {text[-half:]}"


#: The most characters of a task id a line shows whole: no producer sends a longer id
#: (``wire.message.MAX_ID_BYTES``), yet one planted in Redis may be megabytes.
ID_SHOWN_MOST = 200


def shown_id(task_id: str) -> str:
    """A task id as a log line, a listing or a record of outcomes shows it: whole, or
    (one longer than any producer sends) its head and tail around its length."""
    return cut_text(task_id, ID_SHOWN_MOST)


#: The most characters of a name read from Redis (a queue, a worker, a fair queue's group,
#: a host, a pool) a line or a page shows whole: minitask writes none longer (names are
#: at most ``broker.keys.MAX_NAME``, 300; groups at most 200), yet one planted may be
#: megabytes, and ``minitask status`` printed a 2 MB worker name whole.
NAME_SHOWN_MOST = 300
#: The most characters of a list of names read from Redis (a worker's queues, joined by
#: commas) a line or a page shows whole.
NAMES_SHOWN_MOST = 2_000


def shown_name(name: str, most: int = NAME_SHOWN_MOST) -> str:
    """A name read from Redis as a listing, a page or a log line shows it: whole, or
    (one longer than minitask writes) its head and tail around its length, as
    ``shown_id`` shows an id. Escaping it is still ``printable``'s job."""
    return cut_text(name, most)


#: The lines between the tracebacks of a chain of exceptions.
_CHAINED = re.compile(r"(\n\n(?:The above exception was the direct cause of the following "
                      r"exception:|During handling of the above exception, another exception "
                      r"occurred:)\n\n)")
#: A line that may name an exception (``ValueError: ...``, ``shop.Declined``): one
#: starting as a name does, with no colon before the one after the name.
_EXCEPTION_LINE = re.compile(r"[A-Za-z_<][^:]*(?:: .*)?")
#: What marks the first line of a recorded traceback that is not one of a traceback's.
NOT_TRACEBACK = "> "
_HEAD = "Traceback (most recent call last):"


def shown_trace(trace: str, message: Optional[str] = None) -> str:
    """A recorded traceback as a person reads it (``dead show``, ``inspect ID``): its own
    lines kept, every control character escaped (``printable``), and no line that a
    message could forge ("2026-... ERROR ..."). A worker records each exception's texts
    escaped already; a traceback written otherwise (an older version, a planted one)
    cannot be parsed, so this is conservative: a line is kept as a line when it is
    indented (a frame, its source, a group's line), blank, "Traceback (most recent
    call last):", a chain's separator, or the first line after the frames that may
    name an exception; any other is joined to the line before it with its line break
    escaped (``\\x0a``), as a worker records it. ``message`` is not needed: kept for
    the callers."""
    del message
    parts = _CHAINED.split(trace.rstrip())
    for index in range(0, len(parts), 2):  # odd ones: the lines between two tracebacks
        kept: List[str] = []
        named = False  # whether the line naming the exception was found
        for line in parts[index].split("\n"):
            if not line or line[:1].isspace() or not kept and line == _HEAD:
                kept.append(line)
            elif not named and _EXCEPTION_LINE.fullmatch(line):
                named = True
                kept.append(line)
            elif kept:
                kept[-1] += "\\x0a" + line
            else:
                kept.append(NOT_TRACEBACK + line)
        parts[index] = "\n".join(kept)
    return printable("".join(parts), keep_newlines=True)


def error_text(error: BaseException) -> str:
    """What ``str(error)`` says of an exception a task raised; when its ``__str__``
    raises (the app's code: anything, a SystemExit or KeyboardInterrupt too), a text
    that says its text could not be read and what its ``__str__`` raised, naming only
    types. The one way a worker reads the text of an exception it records or logs.

    No signal lands here as an exception: a worker's come through its relay."""
    try:
        return cut_text(str(error), ERROR_TEXT_MOST)
    except BaseException as exc:  # the app's __str__, whatever it raises
        return f"<{UNREADABLE}: its __str__ raised {type(exc).__name__}>"


def error_trace(error: BaseException) -> str:
    """The traceback of ``error`` as a worker records it (``escaped_trace``: each
    exception's own texts escaped, so a message cannot forge a line of it); when
    formatting it raises (the app's code: an exception's ``__getattr__`` asked for
    ``__notes__``, say), its frames and a last line of ``error_text``'s, escaped."""
    try:
        return _formatted(type(error), error, error.__traceback__)
    except BaseException:  # the app's code (of error, or of an exception chained to it)
        try:
            frames = "".join(traceback.format_tb(error.__traceback__))
        except BaseException:  # the same, once more: the frames are lost
            frames = ""
        head = "Traceback (most recent call last):\n" if frames else ""
        return f"{head}{frames}{printable(type(error).__name__)}: {printable(error_text(error))}\n"


def _one_line(text: Any) -> str:
    """An exception's own text (its message, a note, a file name) as one line of a
    traceback: every control character escaped, line breaks too."""
    return printable(text)


def _note(note: Any) -> str:
    """A note (``add_note``) as its line shows it: escaped, and indented, so that not
    even a note without a line break can start a line ("2026-... ERROR ...")."""
    try:
        text = note if isinstance(note, str) else str(note)
    except BaseException:  # the app's __str__, whatever it raises
        text = "<note str() failed>"
    return "  " + _one_line(text)


class _EscapedText(traceback.TracebackException):
    """A traceback whose exception lines (``ValueError: <its text>``) are escaped:
    the text is the task's, and may hold an escape character or a newline. Each line
    is escaped again as it is written, in case a Python version splits one."""

    def format_exception_only(self, **kwargs: Any) -> Iterator[str]:  # type: ignore[override]
        for line in super().format_exception_only(**kwargs):
            yield printable(line[:-1] if line.endswith("\n") else line) + "\n"


def _escape_texts(shown: traceback.TracebackException) -> None:
    """Escape the texts of one exception in ``shown`` BEFORE it is formatted: Python
    splits a note (3.11: each line its own item) and a SyntaxError's file name and
    text into lines, and escaping what it yields keeps those line breaks."""
    fields = vars(shown)
    fields["_str"] = _one_line(fields.get("_str", ""))
    notes = fields.get("__notes__")
    if notes is not None:
        if isinstance(notes, collections.abc.Sequence) and not isinstance(notes, (str, bytes)):
            fields["__notes__"] = [_note(note) for note in notes]
        else:
            fields["__notes__"] = [_note(reprlib.repr(notes))]
    for name in ("filename", "lineno", "end_lineno", "msg"):
        if fields.get(name) is not None:
            fields[name] = _one_line(fields[name])
    text = fields.get("text")
    if isinstance(text, str):  # the source line: what Python strips of it, kept as it is
        kept = text.rstrip("\n")
        body = kept.lstrip(" \n\f")
        fields["text"] = kept[:len(kept) - len(body)] + _one_line(body)


def _escaping(shown: Optional[traceback.TracebackException], seen: Set[int]) -> None:
    """Make ``shown`` and every exception chained to it (cause, context, a group's
    members) escape their texts: the chain is built of plain TracebackExceptions."""
    if shown is None or id(shown) in seen:
        return
    seen.add(id(shown))
    _escape_texts(shown)
    shown.__class__ = _EscapedText
    _escaping(shown.__cause__, seen)
    _escaping(shown.__context__, seen)
    for member in getattr(shown, "exceptions", None) or ():
        _escaping(member, seen)


def _formatted(kind: Any, error: BaseException, frames: Any) -> str:
    """The traceback of ``error`` with each exception's texts escaped, at most
    ``ERROR_TRACE_MOST`` characters of it. Formatting it runs the app's code, which
    may raise."""
    shown = traceback.TracebackException(kind, error, frames)
    _escaping(shown, set())
    return cut_text("".join(shown.format()), ERROR_TRACE_MOST)


def escaped_trace(kind: Any, error: BaseException, frames: Any) -> str:
    """A traceback as a log line shows it: each exception's own texts (message, notes,
    a SyntaxError's file name and text) escaped (``printable``) before its lines are
    joined, the frames as they are, and at most ``ERROR_TRACE_MOST`` characters of it
    all (head and tail, saying how much was cut), as ``error_trace`` keeps it in a
    result. Formatting it runs the app's code, which may raise."""
    return _formatted(kind, error, frames).rstrip("\n")


def logged_trace(error: BaseException) -> str:
    """``escaped_trace`` of ``error``; when formatting it raises (the app's code: an
    exception's ``__getattr__`` asked for ``__notes__``, say), ``error_trace``'s."""
    try:
        return escaped_trace(type(error), error, error.__traceback__)
    except BaseException:  # the app's code, whatever it raised
        return printable(error_trace(error).rstrip("\n"), keep_newlines=True)


def log_error(log: logging.Logger, level: int, msg: str, *args: Any, error: BaseException,
              extra: Optional[Dict[str, Any]] = None) -> None:
    """Log ``msg % args`` at ``level`` with the traceback of ``error``, which the app's
    code raised (a task, a hook, a type's decode function): a bounded one
    (``logged_trace``), never the whole. ``logger.exception`` or ``exc_info`` would
    write all of it: a task raising a 20 MB message wrote 20 MB, and more with its
    traceback, per attempt.

    The record carries the bounded traceback as its ``exc_text``, which a formatter
    prints instead of formatting ``exc_info`` anew; ``exc_info`` stays on the record
    for handlers that want the exception itself (an error tracker's)."""
    if not log.isEnabledFor(level):
        return
    filename, line, function, stack = log.findCaller(False, 2)  # the caller's line
    record = log.makeRecord(log.name, level, filename, line, msg, args,
                            (type(error), error, error.__traceback__), function, extra, stack)
    record.exc_text = logged_trace(error)
    record.trace_escaped = True  # ours: a text formatter prints it as it is
    log.handle(record)


# -- minitask's own loggers: no log call of minitask raises ----------------------------

class ContainedLogger(logging.Logger):
    """A logger whose records never raise into the code that logs them. A handler may
    raise as it writes (the app's log shipper whose server is down; logging's own
    ``handleError`` once a task closed ``sys.stderr``): raised into minitask, it ended
    an outcome half-way and left tasks "running" under a live heartbeat. Each handler
    is called on its own, as ``logging`` calls them (up the hierarchy, then
    ``lastResort``): one that raises loses only its own copy, counted
    (``dropped_records``) and said once per process, straight to file descriptor 2."""

    def handle(self, record: logging.LogRecord) -> None:
        try:
            super().handle(record)
        except Exception as exc:  # a filter the app put on this logger
            _dropped(exc, "a filter")

    def callHandlers(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's
        found = False
        logger: Optional[logging.Logger] = self
        while logger is not None:
            for handler in logger.handlers:
                found = True
                if record.levelno >= handler.level:
                    _written(handler, record)
            logger = logger.parent if logger.propagate else None
        last = logging.lastResort
        if not found and last is not None and record.levelno >= last.level:
            _written(last, record)


def _written(handler: logging.Handler, record: logging.LogRecord) -> None:
    try:
        handler.handle(record)
    except Exception as exc:  # whatever it raised: its copy of the record is lost
        _dropped(exc, f"the log handler {type(handler).__name__}")


_LOGGERS_LOCK = threading.Lock()
_DROPPED = [0]  # records a handler failed to write, in this process


def _dropped(error: Exception, by: str) -> None:
    with _LOGGERS_LOCK:
        _DROPPED[0] += 1
        if _DROPPED[0] > 1:
            return
    said = (f"minitask: {by} raised {type(error).__name__} ({error_text(error)}) writing "
            f"a log record; such records are dropped and counted, never raised (said once)")
    try:  # best effort: what failed may be the very stream a handler writes to
        os.write(2, printable(cut_text(said, 2_000)).encode("utf-8", "replace") + b"\n")
    except Exception:  # no stderr at all: counted only
        pass


def dropped_records() -> int:
    """Copies of records a handler (or filter) of a minitask logger failed to write."""
    return _DROPPED[0]


_CONTAINED: Dict[type, type] = {logging.Logger: ContainedLogger}


def own_logger(name: str) -> logging.Logger:
    """minitask's logger ``name`` (a module's ``__name__``): ``logging.getLogger(name)``
    made a ``ContainedLogger`` in place (a class the app set with ``setLoggerClass``
    kept, the containment mixed in). Every module of minitask gets its logger here
    (``tests/unit/test_own_loggers_contained.py`` checks), so no log call of it raises."""
    found = logging.getLogger(name)
    if not isinstance(found, ContainedLogger):
        with _LOGGERS_LOCK:
            kind = type(found)
            if kind not in _CONTAINED:
                _CONTAINED[kind] = type(f"Contained{kind.__name__}", (ContainedLogger, kind), {})
            found.__class__ = _CONTAINED[kind]
    return found


__all__ = ["ContainedLogger", "cut_text", "dropped_records", "encodable", "error_text",
           "error_trace", "escaped_trace", "json_safe", "log_error", "logged_trace",
           "nests_past", "own_logger", "printable", "readable", "SafeRepr", "short_repr",
           "shown_id", "shown_name", "shown_trace", "shown_value", "typed_back"]
