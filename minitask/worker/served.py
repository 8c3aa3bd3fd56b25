"""The queues a worker is given, checked as ``app.worker()`` takes them: a list, and
each one a task of the app declares, or a warning (a typo, most often), as
``minitask worker -Q`` warns."""
from __future__ import annotations

import difflib
from typing import List, Optional, Protocol, Sequence

from ..errors import ConfigurationError
from ..printable import own_logger

logger = own_logger(__name__)


class Declaring(Protocol):
    """What an app says of its queues."""

    @property
    def name(self) -> str: ...

    def worker_queues(self) -> List[str]: ...

    def check_queue_name(self, queue: str) -> None: ...


def served_queues(app: Declaring, queues: Optional[Sequence[str]]) -> List[str]:
    """The queues a worker of ``app`` serves: ``queues`` as a list, or by default
    ``worker_queues()``. A str is refused (``list("default")`` would serve seven
    queues of one letter each, registered for good); a queue no task declares is
    warned about (``warn_if_undeclared``).

    Raises:
        ConfigurationError: ``queues`` is a str (or bytes), or holds a bad name.
    """
    if isinstance(queues, (str, bytes)):
        raise ConfigurationError(f"app {app.name!r}: worker(queues={queues!r}) takes a list of "
                                 f"queue names, not a {type(queues).__name__}; pass "
                                 f"queues=[{queues!r}] to serve that one queue")
    if not queues:
        return app.worker_queues()
    served = list(queues)
    for queue in served:
        app.check_queue_name(queue)  # before a warning that would serve it "anyway"
        warn_if_undeclared(app, queue)
    return served


def warn_if_undeclared(app: Declaring, queue: str) -> None:
    """Say so when a worker is given a queue no task of the app declares (a typo, most
    often): it still serves it, for tasks sent there from elsewhere."""
    declared = app.worker_queues()
    if queue in declared:
        return
    close = difflib.get_close_matches(queue, declared, n=1)
    logger.warning("queue %r is the queue of no task of app %r (its queues: %s)%s; serving "
                   "it anyway, for tasks sent there from elsewhere", queue, app.name,
                   ", ".join(declared), f"; did you mean {close[0]!r}?" if close else "")
