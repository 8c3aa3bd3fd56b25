"""What every command about an app shares: ``-A``, logging options, loading the app,
and the words (task ids, queue and worker names) of commands that take them."""
from __future__ import annotations

import argparse
import difflib
import json
import math
import re
import sys
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from ..admin import known_queue, lookup_queues, meant
from ..app import Minitask
from ..broker.acl_check import check_nodes, missing_for_scripts, ops_refused
from ..discovery import load_app, load_task_plugins
from ..errors import ConfigurationError
from ..printable import json_safe, own_logger, printable

logger = own_logger("minitask")

#: ``--loglevel``'s choices, given in either case ("debug" is DEBUG).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
#: How close a mistyped command must be to one for a "did you mean" (difflib's
#: ratio): looser than other words' 0.75, since commands are few and far apart
#: ("wrk" is 0.67 of "worker").
COMMAND_CUTOFF = 0.6


class Parser(argparse.ArgumentParser):
    """argparse's parser, with a "did you mean" for a word that is not one of an
    argument's choices (a command, ``--pool``, ``--state``...); its subcommands'
    parsers are of this class too."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's hook for a value outside ``choices``; it has no public one
        if action.choices is not None and value not in action.choices:
            if isinstance(action, argparse._SubParsersAction):
                raise argparse.ArgumentError(action, unknown_command(str(value),
                                                                     list(action.choices)))
            raise argparse.ArgumentError(action, unknown_word("choice", str(value),
                                                              list(action.choices)))


def unknown_word(what: str, word: str, words: Sequence[str], hint: str = "") -> str:
    """Say that ``word`` is no ``what`` (a listing, an action, a command): the closest
    of ``words`` (difflib, case aside) if one is close, and every one of them."""
    return f"unknown {what} {word!r}{meant(word, words)} ({what}s: {', '.join(words)}){hint}"


def unknown_command(word: str, commands: Sequence[str]) -> str:
    """``unknown_word`` for a command: the closest at ``COMMAND_CUTOFF``, else the one
    command ``word`` (two letters or more) begins ("sched": schedules)."""
    close = meant(word, commands, COMMAND_CUTOFF)
    begun = [name for name in commands if len(word) > 1 and name.startswith(word.lower())]
    if not close and len(begun) == 1:
        close = f"; did you mean {begun[0]!r}?"
    return f"unknown command {word!r}{close} (commands: {', '.join(commands)})"


def log_level(text: str) -> str:
    """``--loglevel``'s value, in either case, as logging names it (upper case)."""
    return text.upper()


def close_word(word: str, words: Sequence[str]) -> bool:
    """Whether ``word``, not one of ``words``, is close to one (a typo of it)."""
    return word not in words and bool(meant(word, words))


#: A whole number as an option takes it: ASCII digits, an optional sign.
_WHOLE = re.compile(r"[+-]?[0-9]+")
#: A number of seconds: ASCII digits, an optional sign, fraction and exponent.
_SECONDS = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class Bounded:
    """An argparse ``type`` for a numeric option: a whole number (or, ``seconds``, any
    finite number) from ``low`` to ``high``. Anything else (text, nan, inf, a number
    out of range) is a bad command line, exit 2, naming the option and the range,
    before anything runs: a number no command can use never reaches Redis."""

    def __init__(self, low: float, high: float, *, seconds: bool = False) -> None:
        self.low, self.high, self.seconds = low, high, seconds
        self.__name__ = "seconds" if seconds else "whole number"  # argparse's word for it

    def range(self) -> str:
        kind = "a number of seconds" if self.seconds else "a whole number"
        return f"{kind} from {_number(self.low)} to {_number(self.high)}"

    def __call__(self, text: str) -> Any:
        value: Optional[float] = None
        # ASCII digits only: Python's int() and float() also read "١٠" (Arabic-Indic
        # digits), " 10 " and "1_0", none of which is what the option was given as
        if (_SECONDS if self.seconds else _WHOLE).fullmatch(text) and len(text) <= 40:
            value = float(text) if self.seconds else int(text, 10)
        if value is None or not math.isfinite(value) or not self.low <= value <= self.high:
            shown = text if len(text) <= 30 else text[:27] + "..."
            raise argparse.ArgumentTypeError(f"{shown!r}: give {self.range()}")
        return value


def check_given(kind: str, name: Optional[str]) -> None:
    """A queue name (``kind`` "queue"; a broadcast lane's ``queue:subscriber`` too) or
    a task name (or glob) as a command was given it: one that no queue or task can
    have (a control or format character, whitespace or '{}:' in a queue name) is a
    ConfigurationError (exit 2) escaped once (``printable``), the same for every
    command, before the app is loaded."""
    if name is None:
        return
    if kind == "queue":
        try:
            for part in name.split(":", 1):  # a broadcast lane is queue:subscriber
                Minitask.check_queue_name(part)
        except ConfigurationError as exc:
            raise ConfigurationError(printable(str(exc))) from None
    elif not name or printable(name) != name:
        raise ConfigurationError(f"{kind} name '{printable(name)}' holds a control or format "
                                 f"character, or is empty: no {kind} has such a name")


def _number(value: float) -> str:
    return f"{value:,}" if value >= 100_000 else f"{value}"


def add_log_options(parser: argparse.ArgumentParser, level: str = "INFO") -> None:
    parser.add_argument("--loglevel", default=level, choices=LOG_LEVELS, type=log_level,
                        help=f"the least severe log lines shown, in either case (default: "
                        f"{level})")
    parser.add_argument("--log-format", default="text", choices=("text", "json"),
                        help="text (default), or one JSON object per line")


def add_app_options(parser: argparse.ArgumentParser, level: str = "INFO") -> None:
    parser.add_argument("-A", "--app", required=True,
                        help="an entry point of minitask.apps, a module, or module:attribute")
    add_log_options(parser, level)


def add_yes(parser: argparse.ArgumentParser, acts_on: str) -> None:
    """The one rule of destructive commands: one that acts on more than the ids you
    name (``--all``, a whole queue) does so only with ``--yes``."""
    parser.add_argument("--yes", action="store_true", help=f"really act on {acts_on}")


def confirmed(args: argparse.Namespace, what: str) -> None:
    """Refuse ``what`` (which says how much it would touch) unless ``--yes`` was given.

    Raises:
        ConfigurationError: no ``--yes``; nothing was done.
    """
    if not args.yes:
        raise ConfigurationError(f"this {what}: add --yes to do it")


def takes_words(parser: argparse.ArgumentParser) -> None:
    """Mark a command whose positional words may start with '-'.

    Task ids are random url-safe base64 and one in 64 starts with '-' (a
    user's ``task_id`` may too): argparse would read ``-Xk3...`` as an option.
    So ``main`` takes every word that is not exactly one of the command's
    options (given as its own word, or ``--long=value``) as a word, and hands
    them over as ``args.words``; after ``--`` everything is a word.
    """
    parser.set_defaults(words=[])


def split_words(parser: argparse.ArgumentParser,
                argv: Sequence[str]) -> Tuple[List[str], List[str]]:
    """``argv`` (after the command) as (options with their values, words)."""
    takes_value = {}
    for action in parser._actions:  # argparse has no public list of a parser's options
        for option in action.option_strings:
            takes_value[option] = action.nargs != 0
    options: List[str] = []
    words: List[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        index += 1
        if token == "--":
            words += argv[index:]
            break
        name = token.split("=", 1)[0] if token.startswith("--") else token
        if name not in takes_value:
            words.append(token)
            continue
        if takes_value[name] and name == token and index < len(argv):
            # glued to its option, so that argparse takes a value such as "-q" as a value
            value = argv[index]
            index += 1
            token = f"{name}={value}" if name.startswith("--") else f"{name}{value}"
        options.append(token)
    return options, words


def load(spec: str) -> Minitask:
    """The app ``-A`` names, with its task plugins imported."""
    app = load_app(spec)
    for module in load_task_plugins(app):
        logger.debug("imported task plugin %s", module)
    return app


def require_acl(app: Minitask, scripts: Sequence[str], queue: Optional[str],
                what: str) -> None:
    """Before an ops command writes: refuse (ConfigurationError, exit 2) when the ACL
    user lacks a command of the ``scripts`` it runs, which Redis would refuse only part
    way through one (Redis 7.0 and later; 6.2 cannot be asked: it goes on). On Redis
    Cluster each primary node it may write to is asked (ACLs are each node's own):
    ``queue``'s, or with None those of every queue a lookup by id asks (a handle's,
    as ``cancel`` finds a task's queue, and the ops commands')."""
    transport = app.broker.transport
    queues = [app.default_queue if queue is None else queue]
    if queue is None and transport.connections.pool is None:  # Redis Cluster: every node
        queues += [*app.broker.queues.lookup_names()[0], *lookup_queues(app)[0]]
    keys = [app.broker.queues.keys(name).messages for name in queues]
    check_nodes(
        transport, keys,
        lambda key: missing_for_scripts(transport.client, transport.sources, scripts, key),
        lambda missing, key, node: ConfigurationError(ops_refused(
            missing, key, what, transport.description, node)),
        lambda key, node: transport.errors(f"ask Redis whether the ACL user may {what} "
                                           f"(key {key!r}{f', node {node}' if node else ''})"))


def known(app: Minitask, queue: str) -> bool:
    """Whether ``queue`` is one of the app's (``admin.known_queue``); if not, says so
    as an error (its caller then exits 1: something named was not found). An invalid
    name raises ConfigurationError (exit 2), as every command's does."""
    for part in queue.split(":", 1):  # a broadcast lane is queue:subscriber
        app.check_queue_name(part)
    try:
        known_queue(app, queue, "")
    except ConfigurationError as exc:
        print(f"minitask: error: {exc}", file=sys.stderr)
        return False
    return True


def emit_json(value: Any) -> None:
    # readable text stays as it is; what is not printable (a bidi control, an escape, a
    # lone surrogate read from Redis) goes as its JSON escape: stdout is a terminal
    print(json_safe(json.dumps(value, indent=2, sort_keys=True, default=str,
                               ensure_ascii=False)))


def mistyped_option(command: str, parser: argparse.ArgumentParser, argv: Sequence[str],
                    elsewhere: Iterable[str]) -> Optional[str]:
    """What is wrong with a word of ``argv`` (after the command) that looks like a
    mistyped option rather than an id: one edit away from an option of ``command``
    (``--jsn``), an option of another command (``cancel --all``) or one edit away
    from one (``cancel --al``); None when no word does. Ids that start with '-'
    still work, and after ``--`` nothing is checked."""
    takes_value = {option: action.nargs != 0 for action in parser._actions
                   for option in action.option_strings}
    own = sorted(option for option in takes_value if option.startswith("--"))
    others = set(elsewhere) - set(takes_value)
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            return None
        name = token.split("=", 1)[0]
        if name in takes_value:
            if takes_value[name] and name == token:
                next(tokens, None)  # its value, whatever it looks like
            continue
        if not token.startswith("--"):
            continue
        close = [option for option in own if _one_edit_apart(name, option)]
        if close:
            return (f"no option {name}; did you mean {' or '.join(close)}? (an id that "
                    f"starts with '-' goes after --)")
        if name in others:
            return (f"{name} is an option of another command, not of minitask {command} "
                    f"(its options: {', '.join(own)}); an id that starts with '-' goes "
                    f"after --")
        near = sorted(option for option in others
                      if option.startswith("--") and _one_edit_apart(name, option))
        if near:  # ``cancel --al``: a typo of another command's option
            return (f"no option {name}; did you mean {' or '.join(near)}? That is an option "
                    f"of another command, not of minitask {command} (its options: "
                    f"{', '.join(own)}); an id that starts with '-' goes after --")
    return None


def _one_edit_apart(word: str, option: str) -> bool:
    """One letter added, dropped, changed or two swapped: ``--jsn`` for ``--json``."""
    if word == option or abs(len(word) - len(option)) > 1:
        return False
    if len(word) == len(option):
        diffs = [i for i, (a, b) in enumerate(zip(word, option)) if a != b]
        return len(diffs) == 1 or (len(diffs) == 2 and diffs[1] == diffs[0] + 1
                                   and word[diffs[0]] == option[diffs[1]]
                                   and word[diffs[1]] == option[diffs[0]])
    matcher = difflib.SequenceMatcher(a=word, b=option)
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes()
               if tag != "equal") == 1
