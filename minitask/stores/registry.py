"""WorkerRegistry: live workers and their counters, kept by their heartbeats; and
the orders list each worker listens on (``minitask shutdown``)."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..broker.waits import block_cap
from ..errors import BrokerError
from ..printable import printable
from ..wire.message import MAX_MS, MAX_SECONDS
from .foreign import (ignored, move_aside, name_of, raise_refusals, removed_members,
                      shown_member, text_of, whole)
from .store import Store

#: The order that stops a worker as SIGTERM does.
SHUTDOWN = "shutdown"
#: What a worker pushes to its own list to end its listener's wait as it stops.
WAKE = "wake"
#: Orders left for a worker that never reads them (it died) expire after this.
ORDER_TTL_MS = 60_000
#: Live workers a listing shows at most (``minitask status``, the dashboard), those
#: that beat last first: the rest are counted, "N more not shown".
SHOWN_WORKERS = 500
#: How far ahead of the reader's clock a heartbeat is still a live worker's (ms): three
#: of the longest heartbeat period (5 s). A registry member scored further ahead is
#: listed apart, "clock ahead", and not counted live: a worker whose clock runs ahead
#: (said with its skew), or a record no worker renews (planted, or left by a worker
#: whose clock was ahead), which would otherwise be listed live until its score passed.
TRUSTED_AHEAD_MS = 15_000
#: Members scored ahead that a listing shows at most, the nearest first (the rest are
#: counted): planted +inf members are read last.
SHOWN_AHEAD = 20
#: The most bytes of a registry member a listing reads (a name's 300 characters in
#: UTF-8): a longer member is no worker's id, removed on the server unsent
#: (workers_page.lua) and said once with its length.
NAME_BYTES = 1_200
#: Workers' records read in one round trip.
RECORD_BATCH = 250
#: The fields of a worker's record that hold whole numbers (a time in ms or a count).
_COUNTS = frozenset({"beat_ms", "processed", "failed", "running", "pid", "started_ms",
                     "recycled", "concurrency", "overrun", "unconfirmed", "unconfirmed_ms"})
#: A whole number as a worker writes it (``str(int)``): decimal digits, a minus sign
#: for a clock skew behind. "1e5", "12.0", "+7" or " 7" is no worker's.
_DECIMAL = re.compile(r"-?[0-9]{1,19}")
#: The most a record's ``running_ids`` (a JSON list of the ids a worker runs, at most
#: its concurrency) is read as, in bytes: a longer one was not written by a worker,
#: and is left out (the pages show its running ids as unreadable).
MAX_RUNNING_IDS = 65_536
#: The fields of a worker's record a listing reads, each with the most bytes it is
#: read as (HSTRLEN first: a longer value is not read at all): those a worker writes
#: (``worker.control.register``), never the whole hash. A record planted with a
#: million fields, or one field of 50 MB, made each ``minitask status`` read 80 MB;
#: now a record costs at most about 150 kB however it was filled. Names, hosts and
#: pools are at most 300 characters as minitask writes them (1,200 bytes of UTF-8);
#: a worker's queues list, like its running ids, at most 64 kB.
RECORD_FIELDS: Dict[str, int] = {
    "name": 4_096, "host": 4_096, "pool": 4_096, "queues": 65_536,
    "running_ids": MAX_RUNNING_IDS, "stalled": 8_192,
    **{field: 64 for field in ("pid", "concurrency", "started_ms", "processed", "failed",
                               "running", "recycled", "beat_ms", "clock_skew_ms",
                               "overrun", "unconfirmed", "unconfirmed_ms")}}


@dataclass(frozen=True)
class WorkerListing:
    """What a listing of the worker registry found (``WorkerRegistry.listing``)."""

    #: The live workers listed, those that beat last first (see ``WorkerRegistry.live``).
    live: List[Dict[str, str]]
    #: Live members of the registry not listed: past the limit, or left out (a member
    #: that names no worker, a record gone or not minitask's; said in the log).
    left_out: int = 0
    #: Records whose heartbeat lies more than TRUSTED_AHEAD_MS ahead of the reader's
    #: clock, not counted live, the nearest first; each with ``ahead_ms``, how far
    #: ahead (missing when the score is no time: +inf, 1e300).
    ahead: List[Dict[str, str]] = dataclasses.field(default_factory=list)
    #: Members scored that far ahead not listed.
    ahead_left_out: int = 0
    #: Of ``left_out``: those past the limit (not read), and those read whose record is
    #: gone (it expired: its worker stopped without leaving the registry, killed or cut
    #: off, and its member stays until its heartbeat is too old to be live); the rest
    #: are no worker's (no worker name, a record minitask did not write).
    past_limit: int = 0
    gone: int = 0
    #: Members scored that far ahead, read, that are no worker's to list: no worker
    #: name, or no record a worker wrote (gone, or not minitask's). Each with
    #: ``member`` (escaped, cut: ``_member_text``), ``why`` and
    #: ``ahead_ms`` (missing when the score is no whole number of ms). Never sent an
    #: order (``stoppable_workers`` reads ``ahead``): shown so that "N worker
    #: record(s) ahead" names each one it counts (probe 29h, L3).
    ahead_foreign: List[Dict[str, str]] = dataclasses.field(default_factory=list)


def _member_text(raw: Any) -> str:
    """A registry member as a listing shows it: escaped (``printable``: a control
    character is ``\\x1b``), its first 80 characters and its length when longer."""
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else str(raw)
    return printable(text[:80]) + (f"... ({len(raw):,} long)" if len(text) > 80 else "")


class WorkerRegistry(Store):
    """Who serves an app: one record per worker, expiring unless it beats."""

    scripts = ("workers_page",)

    def heartbeat(self, worker: str, info: Dict[str, Any], now_ms: int, ttl_ms: int) -> None:
        """Record a live worker and its counters; the record expires if it stops beating.

        The registry or the worker's record of another type (no minitask wrote it) is
        moved aside whole and the beat written again: left, it would hide every live
        worker from ``status``, the dashboard and ``minitask shutdown`` for good."""
        key = self.app_keys.worker(worker)
        kinds = {self.app_keys.workers: "sorted set", key: "hash"}
        for attempt in range(2):
            with self.transport.errors("record the worker heartbeat"):
                pipe = self.transport.client.pipeline(transaction=False)
                pipe.zadd(self.app_keys.workers, {worker: now_ms})
                pipe.hset(key, mapping={name: str(value) for name, value in info.items()})
                pipe.pexpire(key, ttl_ms)
                replies = pipe.execute(raise_on_error=False)
                raise_refusals(replies)
            wrong = {where: reply for where, reply in
                     zip((self.app_keys.workers, key, key), replies)
                     if isinstance(reply, Exception)}
            if not wrong:
                return
            for where, reply in wrong.items():
                if attempt:  # planted again at once: this worker goes unlisted this beat
                    ignored(where, f"it holds another type ({reply})")
                else:
                    with self.transport.errors("set aside the worker registry"):
                        move_aside(self.transport.client, where, kinds[where])

    def newest_heartbeat(self) -> Optional[float]:
        """The newest heartbeat in the registry (ms, on the clock of the worker that
        wrote it), read only: a listing prunes by the reader's clock, and a reader whose
        clock is off would prune live workers. None when there is none (a score past
        the year 9999 is none a worker writes) or the key holds another type."""
        try:
            with self.transport.errors("read the newest worker heartbeat"):
                newest = self.transport.client.zrevrangebyscore(
                    self.app_keys.workers, MAX_MS, "-inf", start=0, num=1, withscores=True)
        except BrokerError as exc:
            if exc.reason != "wrong type":
                raise
            return None
        return float(newest[0][1]) if newest else None

    def announce_leases(self, queues: List[str], lease_ms: int) -> None:
        """Say, for each of ``queues`` (a worker's, its lanes too), that a lease of
        it may last ``lease_ms`` (the worker's visibility timeout): each queue keeps
        the longest any worker said, which its fetches read to tell a lease no
        worker holds (a planted one, dated far ahead) from another worker's longer
        one (fetch.lua). Said before the worker's first fetch, never taken back: a
        longest outliving its worker only makes that check more lenient.

        A score no worker can say (past ``MAX_SECONDS``, inf: planted) would make
        ``GT`` keep it for ever, and with it the queue's planted leases: such a
        score is taken out just before."""
        if not queues:
            return
        with self.transport.errors("announce the worker's leases"):
            pipe = self.transport.client.pipeline(transaction=False)
            for queue in queues:
                key = self.keys(queue).lease_longest
                pipe.zremrangebyscore(key, f"({MAX_SECONDS * 1000}", "+inf")
                pipe.zadd(key, {"ms": lease_ms}, gt=True)
            both = pipe.execute(raise_on_error=False)
            raise_refusals(both)
            replies = both[1::2]
        for queue, reply in zip(queues, replies):
            if isinstance(reply, Exception):  # another type: its fetches take no lease
                # for foreign (fetch.lua), so no other worker's is taken for one
                ignored(self.keys(queue).lease_longest, f"it holds another type ({reply})")

    def forget(self, worker: str) -> None:
        with self.transport.errors("unregister the worker"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.zrem(self.app_keys.workers, worker)
            pipe.delete(self.app_keys.worker(worker))
            pipe.execute()

    def live(self, now_ms: int, live_ms: int,
             limit: Optional[int] = SHOWN_WORKERS) -> List[Dict[str, str]]:
        """Workers whose last heartbeat is at most ``live_ms`` old (and at most
        TRUSTED_AHEAD_MS ahead), each a dict of its record with its ``id`` (what keys
        it) and ``name`` (``--name``, else the id); older ones are pruned. At most
        ``limit`` of them, those that beat last first (None: all, however many a
        registry anyone can fill holds; see ``listing``)."""
        return self.listing(now_ms, live_ms, limit).live

    def listing(self, now_ms: int, live_ms: int,
                limit: Optional[int] = SHOWN_WORKERS) -> WorkerListing:
        """The live workers (as ``live``), at most ``limit`` (None: all), those that beat
        last first, and how many more live members there are, not listed; and apart,
        at most SHOWN_AHEAD records scored more than TRUSTED_AHEAD_MS ahead. The
        registry is a sorted set anyone with Redis access can fill: what a listing
        costs stays the same with 10 members or 20,000."""
        client = self.transport.client
        key = self.app_keys.workers
        lowest, trusted = now_ms - live_ms, now_ms + TRUSTED_AHEAD_MS
        with self.transport.errors("list workers"):
            pipe = client.pipeline(transaction=False)
            pipe.zremrangebyscore(key, "-inf", f"({lowest}")
            # a score past the year 9999 (+inf, 1e300) is no heartbeat a worker
            # writes, and would stay "ahead" for ever: pruned as a stale one is (a
            # live worker's next beat adds it back at its time)
            pipe.zremrangebyscore(key, f"({MAX_MS}", "+inf")
            pipe.zcount(key, lowest, trusted)
            pipe.zcount(key, f"({trusted}", "+inf")
            replies = pipe.execute(raise_on_error=False)
            raise_refusals(replies)
            if isinstance(replies[2], Exception):  # another type: no worker can be listed
                ignored(key, f"it holds another type than a sorted set ({replies[2]})")
                return WorkerListing([])
            _, timeless, live, ahead_count = replies
        if timeless:
            ignored(key, f"{timeless} member(s) scored past the year 9999 (+inf: no "
                         f"heartbeat a worker writes) removed")
        # the members (one longer than NAME_BYTES names no worker: removed on the
        # server, never read, said once); those ahead nearest first: members planted
        # at +inf cannot push out a clock ahead
        members, flat, removed, removed_ahead = self.transport.run(
            "workers_page", (key,),
            (lowest, trusted, -1 if limit is None else limit, SHOWN_AHEAD, NAME_BYTES),
            "list workers")
        removed_members(key, [*removed, *removed_ahead], "worker id")
        live, ahead_count = int(live) - len(removed), int(ahead_count) - len(removed_ahead)
        ahead = [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]
        with self.transport.errors("list workers"):
            # the longest silent first, as a ZRANGE lists
            found, gone = self._read(list(reversed(members)))
            scored, _ = self._read([member for member, _ in ahead])
        scores = {name_of(member, "worker"): score for member, score in ahead}
        for info in scored:
            info.pop("ahead_ms", None)  # a field of the record is no measure of ours
            at = whole(scores[info["id"]], 0, MAX_MS)
            if at is not None:
                info["ahead_ms"] = str(at - now_ms)
        listed = {info["id"] for info in scored}
        foreign = []
        for member, score in ahead:  # read, not listed: each named, never just counted
            name = name_of(member, "worker")
            if name is not None and name in listed:
                continue
            entry = {"member": _member_text(member),
                     "why": "no worker name" if name is None else "no worker record"}
            at = whole(score, 0, MAX_MS)
            if at is not None:
                entry["ahead_ms"] = str(at - now_ms)
            foreign.append(entry)
        return WorkerListing(found, live - len(found), scored, ahead_count - len(ahead),
                             past_limit=live - len(members), gone=gone, ahead_foreign=foreign)

    def _read(self, members: List[Any]) -> Tuple[List[Dict[str, str]], int]:
        """The records of registry ``members``; those that name no worker, or hold no
        record minitask wrote, left out (said once in the log); and how many of them
        have no record left (expired: its worker is gone)."""
        names = []
        for member in members:
            name = name_of(member, "worker")
            if name is None:
                ignored(self.app_keys.workers, f"{shown_member(member)} is no worker name")
            else:
                names.append(name)
        records: List[Any] = []
        for start in range(0, len(names), RECORD_BATCH):
            records += self._fetch(names[start:start + RECORD_BATCH])
        return self._records(names, records), sum(record is None for record in records)

    def _fetch(self, names: List[str]) -> List[Any]:
        """The records of workers ``names``: each the fields of RECORD_FIELDS it holds
        (a dict; None when the record is gone), or Redis's error for a key of another
        type. Two round trips: the lengths of those fields (HSTRLEN), then the fields
        within their bound (HMGET). A field too long is not read: it is None (shown as
        "?", a count left out), said in the log naming the key."""
        client = self.transport.client
        fields = list(RECORD_FIELDS)
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.exists(self.app_keys.worker(name))
            for field in fields:
                pipe.hstrlen(self.app_keys.worker(name), field)
        replies = pipe.execute(raise_on_error=False)
        step = len(fields) + 1
        records: List[Any] = []
        wanted: Dict[int, List[str]] = {}
        pipe = client.pipeline(transaction=False)
        for index, name in enumerate(names):
            exists, *sizes = replies[index * step:(index + 1) * step]
            self._refused(exists, "EXISTS", name)
            for size in sizes:
                self._refused(size, "HSTRLEN", name)
            refused = next((size for size in sizes if isinstance(size, Exception)), None)
            if refused is not None or not exists or isinstance(exists, Exception):
                records.append(None if refused is None else refused)
                continue
            record: Dict[str, Any] = {}
            for field, size in zip(fields, sizes):
                if size > RECORD_FIELDS[field]:
                    ignored(self.app_keys.worker(name), f"{field} is {size} bytes long, more "
                                                        f"than a worker writes "
                                                        f"({RECORD_FIELDS[field]})")
                    record[field] = None
            wanted[index] = [field for field, size in zip(fields, sizes)
                             if 0 < size <= RECORD_FIELDS[field]]
            if wanted[index]:
                pipe.hmget(self.app_keys.worker(name), wanted[index])
            records.append(record)
        values = iter(pipe.execute(raise_on_error=False))
        for index, read in wanted.items():
            if read:
                reply = next(values)
                self._refused(reply, "HMGET", names[index])
                if isinstance(reply, Exception):
                    records[index] = reply
                else:
                    records[index].update((field, value) for field, value in zip(read, reply)
                                          if value is not None)
        return records

    def _refused(self, reply: Any, command: str, name: str) -> None:
        """Raise ``reply`` when Redis refused ``command`` on worker ``name``'s record for
        a reason other than its type (an ACL without the command or the key, a full
        Redis...): a BrokerError naming the command, the key and what to grant. Only a
        key of another type is data minitask did not write, left out as such."""
        if isinstance(reply, Exception) and not str(reply).startswith("WRONGTYPE"):
            with self.transport.errors(f"list workers: {command} of the worker record "
                                       f"{self.app_keys.worker(name)} was refused"):
                raise reply

    def _records(self, names: List[str], records: List[Any]) -> List[Dict[str, str]]:
        """The workers' records read, each field checked (``live``)."""
        found = []
        for name, record in zip(names, records):
            key = self.app_keys.worker(name)
            if record is None:  # gone: counted apart
                continue
            if isinstance(record, Exception):
                ignored(key, f"it holds another type than a hash ({record})")
                continue
            info = {}
            for field, value in record.items():
                if value is None:  # too long to read (said in _fetch): its text unknown,
                    if field in ("host", "pool", "queues", "running_ids"):  # a count left
                        info[field] = "?"  # out; running_ids "?": the pages say "unreadable"
                    continue
                field_text, value_text = text_of(field), text_of(value)
                if field_text is None or value_text is None:
                    ignored(key, f"field {shown_member(field)} is not UTF-8 text")
                    continue
                # a count is handed out only as a worker writes it (decimal digits), so
                # that every reader's int() of it holds: "1e5" is None, shown as "?"
                if field_text in _COUNTS and _number(value_text, 0, 2 ** 63) is None:
                    ignored(key, f"{field_text} {shown_member(value_text)} is no count "
                                 f"(decimal digits, as a worker writes it)")
                    continue
                # a worker's clock and Redis's both lie between 1970 and the year 9999:
                # a skew further than MAX_MS either way (or text, non-finite,
                # fractional) was not written by a worker
                if (field_text == "clock_skew_ms"
                        and _number(value_text, -MAX_MS, MAX_MS) is None):
                    ignored(key, f"clock_skew_ms {shown_member(value_text)} is no clock skew "
                                 f"(a whole number of ms, at most {MAX_MS} either way)")
                    continue
                info[field_text] = value_text
            if info:
                # the worker's id keys its record and its orders; its name (--name) is
                # what it is called, the id when it was given none
                info["id"] = name
                if not info.get("name"):
                    info["name"] = name
                found.append(info)
        return found

    # -- orders ------------------------------------------------------------------

    def send_order(self, worker: str, order: str) -> None:
        """Leave an order on a worker's list, where its listener is blocked waiting.

        Raises:
            BrokerError: Redis could not be reached, or the list is a key of another
                type (named, with what to do; nothing was changed).
        """
        key = self.app_keys.control(worker)
        with self.transport.errors(f"send {order!r} to worker {worker}"):
            pipe = self.transport.client.pipeline(transaction=False)
            pipe.rpush(key, order)
            pipe.pexpire(key, ORDER_TTL_MS)
            pushed, _ = pipe.execute(raise_on_error=False)
            raise_refusals([pushed])
        if isinstance(pushed, Exception):
            raise BrokerError(f"could not send {order!r} to worker {printable(worker)}: "
                              f"{_orders_problem(key)}; until then stop it with SIGTERM on "
                              f"its host", reason="wrong type")

    def next_orders(self, worker: str, timeout: float, most: int = 100) -> List[str]:
        """Block until an order for ``worker`` arrives (at most ``timeout`` seconds, and
        less than the connection's socket timeout), then take what else waits, ``most`` in all at
        most: a list filled with orders no minitask wrote is read a bounded batch per
        call, not one round trip each. Empty when none came.

        Raises:
            BrokerError: Redis could not be reached. A list of another type (no
                minitask wrote it) is moved aside whole, said once, and none read.
        """
        key = self.app_keys.control(worker)
        reply = more = None
        try:
            with self.transport.errors("wait for orders"):
                client = self.transport.client
                # within the socket's own timeout (?socket_timeout=2): a quiet wait
                # past it read as Redis lost, and a healthy worker said so at ERROR
                reply = client.blpop([key], timeout=max(0.01, min(timeout, block_cap(client))))
            more = self._more_orders(key, most - 1) if reply is not None and most > 1 else None
        except BrokerError as exc:
            if exc.reason != "wrong type":
                raise
            # left, it would keep minitask shutdown from reaching this worker for good
            with self.transport.errors("set aside the worker's orders list"):
                move_aside(self.transport.client, key, "list")
        if reply is None:
            return []
        # an order no minitask wrote (not UTF-8) is read escaped, as an unknown order:
        # it must not end the listener, or ``minitask shutdown`` would reach no one
        return [order.decode("utf-8", "backslashreplace") if isinstance(order, bytes)
                else order for order in [reply[1], *(more or [])]]

    def _more_orders(self, key: str, most: int) -> Any:
        """What else waits after the order BLPOP took: none when that read fails (a
        reset), so the order already taken is still acted on (a lost SHUTDOWN would
        leave a worker running that ``minitask shutdown`` said it asked)."""
        try:
            with self.transport.errors("wait for orders"):
                return self.transport.client.lpop(key, most)
        except BrokerError as exc:
            if exc.reason == "wrong type":
                raise
            return None


def _number(text: str, low: int, high: int) -> Optional[int]:
    """``text`` as a whole number from ``low`` to ``high`` if it is one as a worker
    writes it (``_DECIMAL``), else None."""
    return whole(text, low, high) if _DECIMAL.fullmatch(text) else None


def _orders_problem(key: str) -> str:
    """What is wrong with a worker's orders list of another type, and what to do."""
    return (f"minitask key {key} (the worker's orders list, which minitask shutdown pushes "
            f"to) holds another type than a list: data minitask did not write; inspect it "
            f"with redis-cli, then delete it (nothing was changed)")
