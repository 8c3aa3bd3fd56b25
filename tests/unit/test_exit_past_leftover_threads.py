"""``exit_past_leftovers``: a process whose work is done ends though threads its tasks
left would hold Python's exit (one that is not a daemon; an executor's, even made in
a daemon thread, which ``concurrent.futures`` joins at exit all the same)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

DEADLINE = 30.0

PROGRAM = textwrap.dedent("""
    import concurrent.futures, logging, sys, threading
    from minitask.worker.leftovers import exit_past_leftovers
    logging.basicConfig(level=logging.INFO)
    never = threading.Event()
    kind = sys.argv[1]
    if kind == "thread":
        threading.Thread(target=never.wait, name="left-thread", daemon=False).start()
    elif kind == "executor":  # made in a daemon thread: its threads are daemons
        def make():
            executor = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="left-call")
            executor.submit(never.wait)
        maker = threading.Thread(target=make, daemon=True)
        maker.start()
        maker.join()
    elif kind == "ends":
        threading.Thread(target=never.wait, args=(0.05,), daemon=False).start()
    exit_past_leftovers(7 if kind != "ends" else 0, wait=0.3)
    print("returned", flush=True)
    sys.exit(5)
""")


@pytest.mark.parametrize("kind,name", [("thread", "left-thread"), ("executor", "left-call_0")])
def test_the_process_exits_with_its_code_naming_what_it_left(kind: str, name: str) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", PROGRAM, kind], capture_output=True,
                          text=True, timeout=DEADLINE)
    assert done.returncode == 7, done.stderr
    assert time.monotonic() - started < DEADLINE
    assert name in done.stderr
    assert "returned" not in done.stdout


def test_threads_that_end_within_the_wait_are_waited_for() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM, "ends"], capture_output=True,
                          text=True, timeout=DEADLINE)
    assert done.returncode == 5, done.stderr
    assert "returned" in done.stdout
    assert "WARNING" not in done.stderr
