"""An app whose tasks make Python write to stderr itself, with texts that try to forge
a log line: an exception in a thread a task started (``threading.excepthook``), a
warning (``warnings.showwarning``), an exception ignored in ``__del__``
(``sys.unraisablehook``); the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import threading
import warnings

from minitask import Minitask

app = Minitask("stray")

#: What a forged line starts with: a log line's time.
FORGED = "2026-11-29 12:00:00,000 ERROR forged"


def _fail() -> None:
    raise ValueError(f"x\x1b[2J\r\n{FORGED} by a thread's exception")


@app.task(retries=0, name="threaded")
def threaded() -> str:
    thread = threading.Thread(target=_fail, name=f"helper\n{FORGED} by a thread name")
    thread.start()
    thread.join()
    return "done"


@app.task(retries=0, name="warned")
def warned() -> str:
    warnings.warn(f"w\x1b[2J\n{FORGED} by a warning", UserWarning)
    return "done"


@app.task(retries=0, name="awarned")
async def awarned() -> str:
    warnings.warn(f"aw\x1b[2J\n{FORGED} by an async task's warning", RuntimeWarning)
    return "done"


class _Leaky:
    def __del__(self) -> None:
        raise ValueError(f"d\x1b[2J\n{FORGED} by __del__")


@app.task(retries=0, name="unraisable")
def unraisable() -> str:
    _Leaky()  # dropped at once: its __del__ raises, and Python can only say so
    return "done"
