"""How many arguments the ACL checks (acl_check.py) ask each command of minitask's
scripts about: as many as Redis takes of it at least, its arity (COMMAND INFO) less
its name, never more nor fewer.

A Redis with redis/redis#14847 (2026) checks a command's arity before
``redis.acl_check_cmd`` answers, and raises "Wrong number of args" for one asked with
too many or too few: that failed the whole check, so every first send and every
worker's start (each command was asked with six keys). Asked with fewer than it takes,
Redis 7.0.15 read past the arguments for the keys and crashed (a user with key
patterns). A command of fixed arity is asked
with exactly its arguments, one of variable arity with its fewest: each count fits a
command whose arity moved from fixed to variable (ZREVRANK's 3 became -3 in 7.2).
Every argument is the key asked about: each of these commands takes its keys at fixed
places or to the end (tests/unit: none by a count or keyword), and the ACL reads no
other argument. tests/integration checks the table against the running server's
COMMAND INFO.
"""
from __future__ import annotations

from typing import Dict, Tuple

_BY_COUNT = {
    0: "time",
    1: "del exists get hkeys hlen incr llen lpop scard smembers strlen type zcard zpopmin",
    2: "decrby hdel hexists hget hmget hscan hstrlen incrby lindex lpos lpush pexpire "
       "rename rpush sadd set sismember srem sscan xdel zmscore zrem zrevrank zscore",
    3: "hincrby hset hsetnx lrem ltrim xrevrange zadd zcount zincrby zrange zrangebyscore "
       "zremrangebyrank zremrangebyscore zrevrange zrevrangebyscore",
    4: "xadd",
}

#: The arguments each command the scripts call is asked with (but XINFO STREAM and
#: MEMORY USAGE, which no check asks about), lower case.
ARGUMENT_COUNTS: Dict[str, int] = {
    name: count for count, names in _BY_COUNT.items() for name in names.split()}


def with_the_key(name: str) -> Tuple[str, ...]:
    """The arguments ``name`` is asked with: the key ('') as each of them."""
    return ("",) * ARGUMENT_COUNTS[name]
