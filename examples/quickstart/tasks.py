"""The quick-start app.

No broker is named, so the app uses ``MINITASK_BROKER_URL`` when it is set and
otherwise the embedded development broker that every process of your user
shares. From the repository root, in one terminal::

    minitask worker -A examples.quickstart.tasks

and in another::

    python -m examples.quickstart.producer
"""
from __future__ import annotations

from typing import Dict

from minitask import Minitask, Retry, current_task

app = Minitask("quickstart")


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task(priority=9)
def word_count(text: str) -> Dict[str, int]:
    """Count the words of ``text``; priority 9 runs before the default 5."""
    counts: Dict[str, int] = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts


@app.task(retries=2)
def patient_hello(name: str) -> str:
    """Ask for a second attempt once, to show ``Retry`` and ``current_task()``."""
    context = current_task()
    assert context is not None  # always set while a worker runs a task
    if context.attempt == 1:
        raise Retry(delay=0.2)
    return f"hello {name}, from attempt {context.attempt} of task {context.id}"
