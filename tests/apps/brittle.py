"""An app whose tasks break what a worker leans on: the process's stderr closed, an
exception text UTF-8 cannot carry, a child process ending with exit code 0 mid-task.
With ``TEST_BROKEN_HANDLER`` set, it adds a root logging handler that raises for
WARNING and above (a log shipper whose server is down), as apps do at import. The
broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import logging
import os
import sys

from minitask import Minitask

app = Minitask("brittle", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")),
               max_deliveries=int(os.environ.get("TEST_MAX_DELIVERIES", "5")))


class Broken(logging.Handler):
    """Raises on every record of WARNING or above: a failing task's line is one."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            raise ConnectionError("log shipper down")


if os.environ.get("TEST_BROKEN_HANDLER"):
    logging.getLogger().addHandler(Broken())


class OddError(Exception):
    """An exception of the app's own."""


@app.task(retries=0, name="fails")
def fails() -> None:
    raise ValueError("ordinary failure")


@app.task(retries=0, name="afails")
async def afails() -> None:
    raise ValueError("ordinary failure")


@app.task(name="double")
def double(x: int) -> int:
    return 2 * x


@app.task(name="close_stderr")
def close_stderr() -> str:
    sys.stderr.close()
    return "closed"


@app.task(retries=1, retry_backoff=0.01, name="surrogate")
def surrogate() -> None:
    raise ValueError(os.fsdecode(b"no file report-\xff.csv"))  # 'report-\udcff.csv'


@app.task(retries=1, retry_backoff=0.01, name="asurrogate")
async def asurrogate() -> None:
    error = OddError("bad \udcff")
    error.add_note("from \udcff")
    raise error


@app.task(retries=0, name="exit0")
def exit0() -> None:
    os._exit(0)
