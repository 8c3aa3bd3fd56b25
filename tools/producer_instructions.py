"""A producer's instructions per ``delay()``, beside a bare redis-py ``LPUSH``: load-free.

The producer's twin of tools/worker_instructions.py: a process makes ``--few`` and
then ``--many`` calls under valgrind's callgrind, and the difference of the two
totals divided by the difference in calls is the instructions of one call, start-up
dropped out. The same for a bare redis-py ``LPUSH`` loop of a body of the same size
(what ``minitask bench``'s delay() row compares with), so the two can be set side
by side without the machine's load in them. User-space instructions of the
producer's process only: not Redis's, not the kernel's (the socket's system calls).
The redis-server is started here.

Usage: python tools/producer_instructions.py [--few 2000] [--many 12000] [--side both]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.servers import RedisServer, free_port  # noqa: E402
from tools.worker_instructions import counted  # noqa: E402

#: What runs under callgrind: ``calls`` calls of one side, after one call of warm-up.
CHILD = """
import sys
import redis
from minitask import Minitask
url, side, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = Minitask("instr", broker=url)

@app.task(name="bench.noop", ignore_result=True)
def noop(index: int) -> None:
    pass

handle = noop.delay(0)
if side == "delay":
    for index in range(calls):
        noop.delay(index)
else:
    body = b"x" * len(app.broker.queues.message_body("default", handle.id) or b"")
    client = redis.Redis.from_url(url)
    client.lpush("instr:lpush", body)
    for _ in range(calls):
        client.lpush("instr:lpush", body)
"""


def run(url: str, side: str, calls: int, directory: Path) -> int:
    """Instructions of a process making ``calls`` calls of ``side``."""
    out = Path(tempfile.mkdtemp(dir=directory))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/callgrind.%p",
                    sys.executable, "-c", CHILD, url, side, str(calls)], cwd=ROOT, env=env,
                   check=True, stderr=subprocess.DEVNULL, timeout=3600)
    return sum(counted(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--few", type=int, default=2000)
    parser.add_argument("--many", type=int, default=12000)
    parser.add_argument("--side", default="both", choices=("both", "delay", "lpush"))
    args = parser.parse_args()
    sides = ("delay", "lpush") if args.side == "both" else (args.side,)
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(free_port(), Path(directory))
        server.start()
        try:
            url = f"redis://127.0.0.1:{server.port}/0"
            per_call = {}
            for side in sides:
                few, many = (run(url, side, calls, Path(directory))
                             for calls in (args.few, args.many))
                per_call[side] = (many - few) / (args.many - args.few)
                print(f"{side}: {per_call[side]:,.0f} instructions per call", flush=True)
        finally:
            server.stop()
    if len(per_call) == 2:
        print(f"delay() / LPUSH: {per_call['delay'] / per_call['lpush']:.2f} x")


if __name__ == "__main__":
    main()
