"""Smoke test of an installed minitask, run by tools/check_dist.py inside a fresh
virtualenv, from a temporary directory outside the source tree.

It writes a small app module next to itself, starts a worker and the dashboard as
the installed console script, then as a producer runs one task, one ``apply_in`` and
one chord through the embedded broker (its data in ``$XDG_DATA_HOME``, a temporary
directory), and reads the dashboard's home page. Exit 0 when everything answered.

Usage: python smoke_dist.py SOURCE_ROOT EXPECTED_VERSION
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Callable, List

APP = '''\
from typing import List

from minitask import Minitask

app = Minitask("distsmoke")


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def total(values: List[int]) -> int:
    return sum(values)
'''

DEADLINE = 60.0


def wait_for(what: str, check: Callable[[], bool], timeout: float = DEADLINE) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise SystemExit(f"smoke: {what}: nothing after {timeout:.0f} s")
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def home_page(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode("utf-8")) if response.status == 200 else ""
    except OSError:
        return ""


def main(source_root: str, version: str) -> int:
    here = Path.cwd()
    (here / "distsmoke_app.py").write_text(APP)
    sys.path.insert(0, str(here))
    import minitask
    from minitask import chord, group

    where = Path(minitask.__file__).resolve()
    if Path(source_root).resolve() in where.parents:
        raise SystemExit(f"smoke: minitask was imported from the source tree: {where}")
    if Path(sys.prefix).resolve() not in where.parents:
        raise SystemExit(f"smoke: minitask is not the installed one: {where}")
    if minitask.__version__ != version:
        raise SystemExit(f"smoke: minitask {minitask.__version__} installed, {version} built")

    script = str(Path(sys.executable).parent / "minitask")
    shown = subprocess.run([script, "--version"], capture_output=True, text=True,
                           check=True, timeout=DEADLINE).stdout.strip()
    if version not in shown:
        raise SystemExit(f"smoke: `minitask --version` said {shown!r}, not {version}")
    print(f"smoke: `minitask --version`: {shown}")

    import distsmoke_app
    port = free_port()
    started: List["subprocess.Popen[bytes]"] = []
    try:
        started.append(subprocess.Popen([script, "worker", "-A", "distsmoke_app",
                                         "--pool", "thread", "-c", "2"]))
        started.append(subprocess.Popen([script, "dashboard", "-A", "distsmoke_app",
                                         "--port", str(port)]))
        handle = distsmoke_app.add.delay(2, 3)
        if handle.get(timeout=DEADLINE) != 5:
            raise SystemExit("smoke: add(2, 3) is not 5")
        asked = time.time()
        later = distsmoke_app.add.apply_in(1.0, 20, 22)
        if later.get(timeout=DEADLINE) != 42:
            raise SystemExit("smoke: add(20, 22) by apply_in is not 42")
        if time.time() - asked < 1.0:
            raise SystemExit("smoke: apply_in(1.0) ran within a second of its call")
        joined = chord(group(distsmoke_app.add.s(i, i) for i in range(4)),
                       distsmoke_app.total.s()).delay()
        if joined.get(timeout=DEADLINE) != 12:
            raise SystemExit("smoke: the chord's total is not 12")
        print("smoke: a task, an apply_in and a chord ran on the installed worker")
        url = f"http://127.0.0.1:{port}/"
        wait_for(f"the dashboard at {url}", lambda: "distsmoke" in home_page(url))
        print(f"smoke: the dashboard served its home page at {url}")
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        subprocess.run([script, "embedded", "stop"], timeout=DEADLINE, check=False)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main(sys.argv[1], sys.argv[2]))
