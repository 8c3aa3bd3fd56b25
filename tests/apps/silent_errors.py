"""Tasks that raise exceptions with no message (``raise GeneratorExit()``), for the
asyncio and thread pools; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

from minitask import Minitask

app = Minitask("silent_errors")


@app.task(retries=0, name="async_silent")
async def async_silent() -> None:
    raise GeneratorExit()


@app.task(retries=1, retry_backoff=0.1, name="plain_silent")
def plain_silent() -> None:
    raise ValueError()
