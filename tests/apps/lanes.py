"""An app with a broadcast queue (``cfg``) and a plain task on the default queue, for
tests that plant data in a subscriber's lane; the broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

from minitask import Minitask

app = Minitask("lanes", visibility_timeout=2.0)


@app.task(broadcast=True, queue="cfg", name="reload")
def reload(version: int) -> int:
    return version


@app.task(name="double")
def double(x: int) -> int:
    return 2 * x
