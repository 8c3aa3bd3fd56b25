"""An app for soft time limit tests; the broker comes from MINITASK_BROKER_URL.

Each task leaves markers in Redis (``marks:<kind>:<key>``, entries
``id:attempt:pid``) so that a test sees what ran and whether its clean-up did.
The plain tasks wait in steps of ``step`` seconds: one long ``time.sleep`` shows
that a signal interrupts a blocking call, short steps let a thread's
asynchronous exception in between them.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time

import redis

from minitask import Minitask, SoftTimeLimitExceeded, current_task

app = Minitask("soft", visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))

#: Longest any task here waits when nothing interrupts it.
LONG = 60.0


def _mark(kind: str, key: str) -> None:
    context = current_task()
    assert context is not None
    client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    client.rpush(f"marks:{kind}:{key}", f"{context.id}:{context.attempt}:{os.getpid()}")
    client.close()


def _wait(seconds: float, step: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(min(step, max(end - time.monotonic(), 0.0)))


@app.task(soft_timeout=0.5, timeout=30)
def cleans_up(key: str, step: float) -> str:
    """Catch the soft limit, write a marker (the clean-up), return."""
    _mark("started", key)
    try:
        _wait(LONG, step)
    except SoftTimeLimitExceeded:
        _mark("cleaned", key)
        return "cleaned"
    return "never interrupted"


@app.task(soft_timeout=0.5, timeout=3)
def ignores(key: str, step: float, seconds: float) -> str:
    """Note the soft limit and go on regardless, for ``seconds`` in all. The limit is
    caught wherever it lands, the started mark included: on a loaded machine that
    mark's first connection once took past the 0.5 s."""
    end = time.monotonic() + seconds
    started = False
    while time.monotonic() < end:
        try:
            if not started:
                started = True
                _mark("started", key)
            _wait(end - time.monotonic(), step)
        except SoftTimeLimitExceeded:
            _mark("soft", key)
    _mark("done", key)
    return "ran on"


@app.task(soft_timeout=0.5, retries=1, retry_backoff=0.01)
def uncaught(key: str, step: float) -> str:
    """The first attempt lets the soft limit escape (a failure); the second is quick."""
    context = current_task()
    assert context is not None
    _mark("started", key)
    if context.attempt == 1:
        _wait(LONG, step)
    return f"attempt {context.attempt}"


@app.task(soft_timeout=0.5)
def escapes(key: str, step: float) -> str:
    """Lets the soft limit escape, with no retry left: dead-lettered with it."""
    _mark("started", key)
    _wait(LONG, step)
    return "never interrupted"


@app.task(soft_timeout=0.5)
def quick(key: str) -> str:
    """Ends well before its soft limit, which must not follow it anywhere."""
    _mark("done", key)
    return key


@app.task
def nap(key: str, seconds: float) -> str:
    """No soft limit: sleep through the time a stray one would ring."""
    _wait(seconds, 0.01)
    _mark("done", key)
    timer = signal.getitimer(signal.ITIMER_REAL)
    return f"{key} timer={timer[0]:g}"


async def _amark(kind: str, key: str) -> None:
    await asyncio.to_thread(_mark, kind, key)


@app.task(soft_timeout=0.5, timeout=30)
async def acleans_up(key: str) -> str:
    """Catch the soft limit, await a clean-up, return."""
    await _amark("started", key)
    try:
        await asyncio.sleep(LONG)
    except SoftTimeLimitExceeded:
        await asyncio.sleep(0.05)  # awaiting in the clean-up works
        await _amark("cleaned", key)
        return "cleaned"
    return "never interrupted"


@app.task(soft_timeout=0.5, timeout=3)
async def aignores(key: str) -> str:
    """Note the soft limit and go on: cancelled at the hard limit."""
    await _amark("started", key)
    end = time.monotonic() + LONG
    while time.monotonic() < end:
        try:
            await asyncio.sleep(end - time.monotonic())
        except SoftTimeLimitExceeded:
            await _amark("soft", key)
    await _amark("done", key)
    return "ran on"


@app.task
async def anap(key: str, seconds: float) -> str:
    """No soft limit: sleep through the time a stray one would come."""
    await asyncio.sleep(seconds)
    await _amark("done", key)
    return key
