"""``make demo``, part two: the log-distribution example on a throwaway embedded broker.

Starts three processors (``minitask worker -A examples.logfanout.tasks --name
pN``), sends sample.log as broadcast calls, waits with ``join()`` for all of
them, prints their totals (each processor saw every line), stops the workers
with SIGTERM, and prints ``logfanout OK``; exits 1 when anything went wrong.

Run from the repository root: ``python examples/logfanout/demo.py``.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import List

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import minitask.broker.embedded  # noqa: E402

PROCESSORS = ("p1", "p2", "p3")


def main() -> int:
    data_dir = tempfile.mkdtemp(prefix="minitask-logfanout-")
    os.environ["MINITASK_BROKER_URL"] = "embedded://" + data_dir
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    from examples.logfanout import producer
    from examples.logfanout.tasks import app
    workers: List["subprocess.Popen[bytes]"] = []
    ok = False
    try:
        for name in PROCESSORS:
            log = open(os.path.join(data_dir, f"{name}.log"), "wb")
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "minitask", "worker", "-A", "examples.logfanout.tasks",
                 "--pool", "thread", "--name", name, "--grace", "5"], cwd=ROOT, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
            log.close()
        deadline = time.monotonic() + 60
        while {s.name for s in app.subscribers("logs")} < set(PROCESSORS):
            if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
                print("the processors did not start")
                return 1
            time.sleep(0.05)
        print(f"started processors {', '.join(PROCESSORS)}")
        ok = producer.main(["--timeout", "30"]) == 0
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        ok = all(worker.wait(timeout=30) == 0 for worker in workers) and ok
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)
        app.close()
        try:
            minitask.broker.embedded.stop(data_dir)
        except minitask.MinitaskError as exc:
            print(f"could not stop the embedded broker in {data_dir}: {exc}")
        shutil.rmtree(data_dir, ignore_errors=True)
    print("logfanout OK" if ok else "logfanout FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
