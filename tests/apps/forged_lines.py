"""An app whose tasks raise exceptions whose own texts try to forge a log line: a note,
a chained cause whose message ends in an indented line, a SyntaxError whose file name
holds a line break; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

from minitask import Minitask

app = Minitask("forged")

#: What a forged line starts with: a log line's time.
FORGED = "2026-11-29 12:00:00,000 ERROR forged"


@app.task(retries=0, name="noted")
def noted() -> None:
    error = ValueError("noted")
    error.add_note(f"E\x1b[2J\r\n{FORGED} by a note")
    error.add_note(f"{FORGED} by a note with no line break")
    raise error


@app.task(retries=0, name="chained")
def chained() -> None:
    try:
        raise ValueError(f"x\n{FORGED} by a cause\n    pad")
    except ValueError as error:
        raise RuntimeError("outer") from error


@app.task(retries=0, name="syntax")
def syntax() -> None:
    raise SyntaxError(f"bad\n{FORGED} by a message",
                      (f"f\r\n{FORGED} by a file name", 1, 2, f"text\n{FORGED} by a text"))
