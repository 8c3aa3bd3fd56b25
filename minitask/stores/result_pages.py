"""Kept results read a page at a time, without waiting for any.

A group's ``get()`` waited for its members one after the other, a round trip each
even when their results were there: 20,000 members took seconds, whatever its
timeout. It reads them a page at a time (``PAGE`` members, one round trip) and
checks its deadline between pages, waiting only for a member whose result is not
there yet.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from ..broker.pools import PoolExhausted, pool_waits_cut_at

if TYPE_CHECKING:
    from .results import ResultStore

#: Members read in one round trip: a page of 500 results (or states) is read in
#: milliseconds, so a deadline checked between pages is kept within one of them.
PAGE = 500


def kept_results(store: ResultStore, tasks: Sequence[Tuple[str, str]],
                 deadline: Optional[float], what: str) -> List[Optional[bytes]]:
    """Each ``(queue, task id)``'s kept result, as its wait would return it at once;
    None where there is none yet, where its key holds another type (the task's own
    wait says which), and for all when no connection of a full sending pool came
    free before ``deadline``: then each task's own wait looks.

    Raises:
        BrokerError: Redis could not be reached.
    """
    keys = [store.keys(queue).result(task_id) for queue, task_id in tasks]
    with store.transport.errors(what):
        try:
            # one key a command (its own hash tag): a cluster sends each to its node
            with pool_waits_cut_at(math.inf if deadline is None else deadline), \
                    store.transport.client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.lindex(key, -1)  # the one element: what the wait reads
                replies = pipe.execute(raise_on_error=False)
        except PoolExhausted:
            return [None] * len(keys)
    return [reply if isinstance(reply, bytes) else None for reply in replies]
