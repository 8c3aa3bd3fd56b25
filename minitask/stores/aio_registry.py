"""The asyncio producer's listing of a queue in the app's registry, as the blocking
path's (``QueueStore.register_queues``): a registry key of another type (data minitask
did not write) is said once and left as it is, the queue run unlisted; a task written
before is never told "could not" (``queue.after_write``)."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

import redis

from .foreign import ignored
from .queue import after_write


async def list_queue(client: Any, key: str, queue: str,
                     errors: Callable[[str], ContextManager[None]]) -> None:
    """SADD ``queue`` to the registry ``key`` with ``client`` (redis.asyncio), after the
    write of its task(s); ``errors``: the async broker's, wording a failure.

    Raises:
        BrokerError: ``sent`` (the tasks are written): Redis failed or refused the
            SADD for any other reason than the key's type.
    """
    with after_write(), errors("register queues"):
        try:
            await client.sadd(key, queue)
        except redis.ResponseError as exc:
            if not str(exc).startswith("WRONGTYPE"):
                raise
            # another type: the queues still run, unlisted (said once, as the sync path)
            ignored(key, f"it holds another type than a set ({exc})")
