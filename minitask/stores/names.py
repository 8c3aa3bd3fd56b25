"""Bounded reads of the app's registries of queue and lane names.

Anyone with Redis access can fill a registry (and every subscriber of a broadcast
queue has a lane): a read never takes it whole. It counts the members (SCARD) and
takes at most ``most`` of them by SSCAN, queues before lanes, in the order Redis
keeps them; the rest are counted as not read, for a listing to say so.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ..broker.keys import MAX_NAME
from ..broker.transport import Transport
from .foreign import ignored, name_of, raise_refusals, removed_members, shown_member, summarised
from .scripts import source

#: Names a read of the registries takes by default (a lookup by id asks at most these).
REGISTRY_READ = 1000
#: Members one SSCAN page asks for.
PAGE = 500
#: The most bytes of a member a read takes: a lane's, ``queue:subscriber``, two names'
#: characters in UTF-8 and the colon (an older minitask kept lanes in the queue
#: registry too). A longer member is no name minitask wrote: the page script
#: (names_page.lua) removes it on the server instead of sending it, said once with its
#: length (4 planted members of 50 MB cost each ``minitask status`` 1.4 GB).
MEMBER_BYTES = 2 * 4 * MAX_NAME + 1


def read_names(transport: Transport, keys: Sequence[str], most: int = REGISTRY_READ,
               apart: Sequence[str] = (), invalid: Optional[List[int]] = None
               ) -> Tuple[List[str], int]:
    """At most ``most`` names of the sets ``keys``, in that order (each sorted), and how
    many members they hold besides: not read, or no name (left out, said in the log).
    Names ``apart`` (those the app declares, asked anyway) are not counted as left out
    when not read (SISMEMBER each, in one round trip). ``invalid``'s first item is added
    how many of those left out were read and name nothing (the rest were not read)."""
    names: List[str] = []
    left = 0
    with summarised():
        for key in keys:
            found, other, whole, bad = _read(transport, key, max(0, most - len(names)))
            names += sorted(found)
            left += other
            if invalid is not None:
                invalid[0] += bad
            unread = [name for name in dict.fromkeys(apart) if name not in found]
            if not whole and unread:  # (read whole: an unread name is not there)
                with transport.errors("list queues"):
                    pipe = transport.client.pipeline(transaction=False)
                    for name in unread:
                        pipe.sismember(key, name)
                    left -= sum(1 for reply in pipe.execute(raise_on_error=False)
                                if reply is True or reply == 1)
    return names, left


def registered(transport: Transport, keys: Sequence[str], name: str) -> bool:
    """Whether one of the sets ``keys`` holds ``name``: one round trip, whatever their
    size (a set of another type holds none)."""
    with transport.errors(f"look up queue {name!r}"):
        pipe = transport.client.pipeline(transaction=False)
        for key in keys:
            pipe.sismember(key, name)
        replies = pipe.execute(raise_on_error=False)
        raise_refusals(replies)  # inside: errors() makes a refusal a BrokerError
    return any(reply is True or reply == 1 for reply in replies)


def _read(transport: Transport, key: str, most: int) -> Tuple[List[str], int, bool, int]:
    """At most ``most`` names of set ``key``, how many members it holds besides,
    whether every member was read, and how many of those read name nothing."""
    with transport.errors("list queues"):
        pipe = transport.client.pipeline(transaction=False)
        pipe.scard(key)
        (total,) = pipe.execute(raise_on_error=False)
        raise_refusals([total])
        if isinstance(total, Exception):  # another type: the queues the app declares
            ignored(key, f"it holds another type than a set ({total})")
            return [], 0, True, 0
        members: List[Any] = []
        cursor: Any = 0
        whole = not total
        removed: List[Any] = []
        if most and not whole:
            transport.register("names_page", source("names_page"))
        while most and len(members) < most and not whole:
            cursor, page, lengths = transport.run("names_page", (key,),
                                                  (cursor, PAGE, MEMBER_BYTES), "list queues")
            members += page
            removed += lengths
            whole = int(cursor) == 0
    removed_members(key, removed, "queue name")
    total = int(total) - len(removed)
    names = []
    read = list(dict.fromkeys(members))[:most]  # SSCAN may repeat one
    for member in read:
        name = name_of(member)
        if name is None:
            ignored(key, f"{shown_member(member)} is no queue name")
        else:
            names.append(name)
    unique = len(set(members))
    return (names, max(0, total - len(names)), whole and unique <= most,
            len(read) - len(names))
