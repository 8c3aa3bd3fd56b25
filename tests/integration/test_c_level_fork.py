"""A child forked at C level (``fork()`` called from C: an extension, ``ctypes``) runs no
Python fork hook: it must still know its own pid, and never use its parent's sockets."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.support.paths import ROOT
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Run in a fresh interpreter (one thread: a C-level fork of a process with threads
#: would copy locks they hold). Exit codes: 0 fine, 3 the child took its parent's
#: connection, 4 its pid wrong, 5 a call failed, 6 the waiter its parent's.
CHILD = textwrap.dedent("""
    import ctypes, os, sys
    import redis
    from minitask.broker.connections import Connections, current_pid

    client = redis.Redis(port=int(sys.argv[1]))
    connections = Connections(client)
    assert connections.call("PING")
    parent, waiter = connections.own(), connections.waiter()
    pid = ctypes.PyDLL(None).fork()  # the GIL held through it: no Python hook runs
    if pid == 0:
        code = 0
        try:
            if current_pid() != os.getpid():
                code = 4
            elif connections.own() is parent:
                code = 3
            elif connections.waiter() is waiter:
                code = 6
            elif not connections.call("PING"):
                code = 5
        except BaseException:
            code = 5
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert connections.own() is parent, "the parent keeps its connection"
    assert current_pid() == os.getpid()
    print(os.waitstatus_to_exitcode(status))
""")


def test_a_child_forked_from_c_makes_connections_of_its_own(redis_server: RedisServer) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(redis_server.port)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0", (
        f"the C-level forked child exited {done.stdout.strip()} (3: it took its parent's "
        f"connection, 4: it read its parent's pid, 5: a call failed, 6: its parent's waiter)")


def test_the_pid_is_right_after_os_fork_too(redis_server: RedisServer) -> None:
    script = CHILD.replace("ctypes.PyDLL(None).fork()", "os.fork()")
    done = subprocess.run([sys.executable, "-c", script, str(redis_server.port)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0", done.stdout
