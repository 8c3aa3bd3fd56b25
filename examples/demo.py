"""``make demo``: the shop's order emails, end to end, on the embedded broker.

Starts a throwaway embedded broker (its data in a temporary directory, so the
default one under ~/.local/share/minitask is not touched) and a real worker
process, ``minitask worker -A examples.orders.tasks --pool process -c 2``;
enqueues tasks of every kind; waits for each result; prints a report and the
output of ``minitask status``; stops the worker with SIGTERM and checks that it
exits 0. Exits 1 when anything did not turn out as expected. Takes a few
seconds, and never more than a minute.

Run from the repository root: ``python examples/demo.py``.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# `python examples/demo.py` puts examples/ on sys.path, but the app module the
# worker loads is examples.orders.tasks: import it under that same name.
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import minitask.broker.embedded  # noqa: E402
from examples.orders import tasks  # noqa: E402
from minitask import ResultTimeout, TaskFailed, TaskHandle  # noqa: E402

APP = "examples.orders.tasks"
WORKER_ARGS = ["-m", "minitask", "worker", "-A", APP, "--pool", "process", "-c", "2",
               "--grace", "5"]
#: Seconds every result may take, counted from the start of the demo.
RESULTS_WITHIN = 30.0


class DemoFailed(Exception):
    """Something the demo needs did not happen (the worker died, a result never came)."""


@dataclass
class Expected:
    """One enqueued call and what should become of it."""

    kind: str
    handle: TaskHandle[Any]
    status: str
    check: Callable[[Any], bool]
    status_seen: str = ""
    result: Any = None


def main() -> int:
    data_dir = tempfile.mkdtemp(prefix="minitask-demo-")
    # Producer (this process) and worker share the throwaway embedded broker;
    # a MINITASK_BROKER_URL of your own is overridden for both.
    os.environ["MINITASK_BROKER_URL"] = "embedded://" + data_dir
    os.environ[tasks.OUTBOX_ENV] = os.path.join(data_dir, "outbox.txt")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    log_path = os.path.join(data_dir, "worker.log")
    ok = False
    try:
        ok = _run(data_dir, log_path)
    except (DemoFailed, minitask.MinitaskError) as exc:
        print(f"\ndemo FAILED: {exc}")
    finally:
        if not ok and os.path.exists(log_path):
            _print_tail(log_path)
        try:
            minitask.broker.embedded.stop(data_dir)
        except minitask.MinitaskError as exc:
            print(f"could not stop the demo's embedded broker in {data_dir}: {exc}")
        shutil.rmtree(data_dir, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous)
    return 0 if ok else 1


def _run(data_dir: str, log_path: str) -> bool:
    """Enqueue, run, check and report; True when everything ended as expected."""
    started = time.monotonic()
    print(f"minitask demo: app {tasks.app.name!r} on a throwaway embedded broker in {data_dir}")
    expected: List[Expected] = []

    # Before any worker runs, so the backlog shows the priorities at work:
    # five newsletters (priority 1), then one password reset (priority 9).
    newsletters = tasks.send_newsletter.delay_many([(user_id, "March deals")
                                                    for user_id in range(1, 6)])
    reset = tasks.send_password_reset.delay(42)
    # The same task_id twice while the first is pending: enqueued once.
    sold = tasks.send_item_sold.apply_async((1001, "brass lamp", "bob@example.com"),
                                            task_id="order-1001-sold")
    sold_again = tasks.send_item_sold.apply_async((1001, "brass lamp", "bob@example.com"),
                                                  task_id="order-1001-sold")
    # A sale planned for an hour from now, then called off.
    called_off = tasks.put_on_sale.apply_in(3600, "old lamp", 50)
    was_cancelled = called_off.cancel()
    print("enqueued 5 newsletters (priority 1), then a password reset (priority 9), "
          "before starting the worker")

    log = open(log_path, "ab")
    try:
        worker = subprocess.Popen([sys.executable, *WORKER_ARGS], cwd=ROOT, stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
    finally:
        log.close()
    print(f"started worker pid {worker.pid}: minitask {' '.join(WORKER_ARGS[2:])}")

    try:
        now = time.time()
        sale_at = _dt.datetime.fromtimestamp(now + 2.0, tz=_dt.timezone.utc)
        expected += [
            Expected("delay_many", handle, "succeeded", _is_str)
            for handle in newsletters]
        expected += [
            Expected("delay, priority 9", reset, "succeeded", _is_str),
            Expected("apply_async task_id", sold, "succeeded", _is_str),
            Expected("same task_id again", sold_again, "succeeded",
                     lambda value: sold_again.id == sold.id),
            Expected("cancelled", called_off, "cancelled",
                     lambda error: was_cancelled and _failed_with(error, "Cancelled")),
            Expected("delay", tasks.send_item_sold.delay(1002, "oak table", "cy@example.com"),
                     "succeeded", _is_str),
            Expected("apply_in 1 s", tasks.put_on_sale.apply_in(1.0, "brass lamp", 20),
                     "succeeded", lambda value: time.time() >= now + 1.0),
            Expected("apply_at +2 s", tasks.put_on_sale.apply_at(sale_at, "oak table", 10),
                     "succeeded", lambda value: time.time() >= sale_at.timestamp()),
            Expected("retried", tasks.send_receipt.delay(1001, "ann@example.com"),
                     "succeeded", lambda value: str(value).endswith("(attempt 2)")),
            Expected("dead letter", tasks.send_invoice.delay(1003, "nobody"), "failed",
                     lambda error: _failed_with(error, "ValueError")),
        ]
        deadline = started + RESULTS_WITHIN
        for item in expected:
            _wait(item, worker, deadline)
        problems = _report(expected)
        problems += _check_outbox()
        problems += _check_dead_letters(expected)
        _wait_for_heartbeat(after=time.time(), worker=worker)
        _print_status()
    finally:
        code = _stop(worker)
        _stop_for_good(worker)  # pool children left behind, if any
    if code != 0:
        problems.append(f"the worker exited with code {code} after SIGTERM, not 0")
    else:
        print("worker stopped by SIGTERM: exit code 0")
    if problems:
        print("\ndemo FAILED:\n  " + "\n  ".join(problems))
        return False
    print(f"\ndemo OK: all {len(expected)} tasks ended as expected")
    return True


def _wait(item: Expected, worker: "subprocess.Popen[bytes]", deadline: float) -> None:
    """Wait for one result with get(), in short steps so a dead worker is noticed."""
    while True:
        step = max(0.01, min(1.0, deadline - time.monotonic()))
        try:
            item.result = item.handle.get(timeout=step)
            break
        except TaskFailed as exc:
            item.result = exc
            break
        except ResultTimeout:
            if worker.poll() is not None:
                raise DemoFailed(f"the worker exited with code {worker.returncode}") from None
            if time.monotonic() >= deadline:
                raise DemoFailed(f"no result for {item.kind} task {item.handle.id} within "
                                 f"{RESULTS_WITHIN:g} s of the start") from None
    # A handle rebuilt from the id alone, as a web request holding only the id would.
    item.status_seen = tasks.app.handle(item.handle.id).status()


def _report(expected: List[Expected]) -> List[str]:
    print(f"\n{'kind':<20} {'task id':<24} {'status':<10} result")
    problems = []
    for item in expected:
        if isinstance(item.result, TaskFailed):
            shown = f"{item.result.exc_type}: {item.result.message}"
        elif isinstance(item.result, str):
            shown = item.result
        else:
            shown = repr(item.result)
        good = item.status_seen == item.status and item.check(item.result)
        print(f"{item.kind:<20} {item.handle.id:<24} {item.status_seen:<10} {shown}"
              + ("" if good else "   <-- UNEXPECTED"))
        if not good:
            problems.append(f"{item.kind} task {item.handle.id}: status {item.status_seen!r} "
                            f"(expected {item.status!r}), result {shown}")
    return problems


def _check_outbox() -> List[str]:
    with open(os.environ[tasks.OUTBOX_ENV], encoding="utf-8") as file:
        sent = file.read().splitlines()
    print("\nemails in the order they went out:")
    for number, line in enumerate(sent, 1):
        print(f"  {number:>2}. {line}")
    problems = []
    position = [i for i, line in enumerate(sent) if "Reset your password" in line]
    # Enqueued after the five newsletters, the reset is fetched before them; two
    # children run at once, so one newsletter at most may end first (the reset, a
    # child's first task, can be slow), and other emails of priority 5 may too.
    ahead = sum("Newsletter" in line for line in sent[:position[0]]) if position else 0
    if len(position) != 1 or ahead > 1:
        problems.append(f"the password reset went out as email {position}, after {ahead} "
                        f"of the newsletters enqueued before it")
    sold_once = [line for line in sent if "(order 1001)" in line and "was sold" in line]
    if len(sold_once) != 1:
        problems.append(f"order 1001's sold email went out {len(sold_once)} times, not once")
    return problems


def _check_dead_letters(expected: List[Expected]) -> List[str]:
    dead = {letter.task_id: letter for letter in tasks.app.dead_letters()}
    print("\ndead letters:")
    for letter in dead.values():
        print(f"  {letter.task_id} {letter.name}{tuple(letter.args)}: {letter.reason} after "
              f"{letter.attempts} attempt(s): {letter.exc_type}: {letter.message}")
    wanted = {item.handle.id for item in expected if item.kind == "dead letter"}
    if set(dead) != wanted:
        return [f"dead letters are {sorted(dead)}, expected {sorted(wanted)}"]
    return []


def _status(*options: str) -> "subprocess.CompletedProcess[bytes]":
    try:
        return subprocess.run([sys.executable, "-m", "minitask", "status", "-A", APP, *options],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=20, check=False)
    except subprocess.TimeoutExpired:
        raise DemoFailed("minitask status did not answer within 20 s") from None


def _wait_for_heartbeat(after: float, worker: "subprocess.Popen[bytes]") -> None:
    """Workers send their counters with their heartbeat (every 5 s here): wait for one."""
    deadline = time.monotonic() + 8.0
    while time.monotonic() < deadline and worker.poll() is None:
        done = _status("--json")
        if done.returncode != 0:
            break  # _print_status shows why
        ages = [w["heartbeat_age_s"] for w in json.loads(done.stdout)["workers"]]
        if any(age <= time.time() - after for age in ages):
            return
        time.sleep(0.5)


def _print_status() -> None:
    print(f"\n$ minitask status -A {APP}")
    done = _status()
    print(done.stdout.decode(errors="replace").rstrip())
    if done.returncode != 0:
        print(done.stderr.decode(errors="replace").rstrip())
        raise DemoFailed(f"minitask status exited with code {done.returncode}")


def _stop(worker: "subprocess.Popen[bytes]") -> Optional[int]:
    """SIGTERM: the worker finishes what runs (grace 5 s) and exits 0."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    try:
        return worker.wait(timeout=15)
    except subprocess.TimeoutExpired:
        _stop_for_good(worker)
        return None


def _stop_for_good(worker: "subprocess.Popen[bytes]") -> None:
    """Kill the worker and its pool children (its own process group), if any remain."""
    try:
        os.killpg(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _print_tail(log_path: str, lines: int = 40) -> None:
    with open(log_path, encoding="utf-8", errors="replace") as file:
        tail = file.read().splitlines()[-lines:]
    print(f"\nlast {len(tail)} lines of the worker's log:")
    for line in tail:
        print("  " + line)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _failed_with(error: Any, exc_type: str) -> bool:
    return isinstance(error, TaskFailed) and error.exc_type == exc_type


def _exit_on_sigterm(signum: int, frame: Optional[FrameType]) -> None:
    raise SystemExit(128 + signum)  # runs the clean-up in main()'s finally


if __name__ == "__main__":
    sys.exit(main())
