"""One queue of a worker whose every fetch Redis refuses (its script's own runtime
error, tests/apps/refusing.py: no planted data is known to refuse one any more, a
leases key of another type being moved aside) is that queue's problem only: a real
worker on a real redis-server runs the tasks of its other queue, each once, says once
which queue and which key Redis refuses (never "Redis is back", as after an outage),
and serves the refused queue again by itself once the key is fixed.

Before (probe 10, M1), the refusal went up as an outage of the whole fetch: the worker
served no other queue while the refused one came first, and logged an ERROR then a
"Redis is back" line on every fetch while it came second, for as long as the key
stayed.
"""
from __future__ import annotations

import signal
import time
from typing import List

import pytest

from minitask.broker.keys import QueueKeys
from minitask.worker.outages import SAY_AGAIN_AFTER
from tests.support.crash_kit import DEADLINE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

BUSY = QueueKeys("basic", "busy")
#: Rounds of tasks sent to the busy queue, each once the last ran: the worker goes idle
#: and fetches again between them, some hundreds of fetches in all.
ROUNDS, PER_ROUND = 30, 8


def most_lines(processes: int, lasted: float) -> int:
    """Most log lines about the refused queue while it stays refused for ``lasted``
    seconds: per process that fetches, the warning and its repetitions (one per
    SAY_AGAIN_AFTER at most), and one more for a repetition due as it ends."""
    return processes * (2 + int(lasted // SAY_AGAIN_AFTER))


def lines_about_stuck(text: str) -> List[str]:
    return [line for line in text.splitlines() if "stuck" in line]


@pytest.mark.parametrize("pool,queues", [("thread", "stuck,busy"), ("thread", "busy,stuck"),
                                         ("process", "stuck,busy"),
                                         ("asyncio", "stuck,busy")])
def test_a_refused_queue_is_set_aside_and_the_other_flows(kit: Kit, pool: str,
                                                          queues: str) -> None:
    log = kit.logs / "worker-0.log"
    fetching = 2 if pool == "process" else 1  # each process pool child fetches
    flag = kit.logs / "refuse"
    worker = kit.worker("--pool", pool, "-c", "2", "-Q", queues, app="tests.apps.refusing",
                        TEST_REFUSED_QUEUE="stuck", TEST_REFUSED_WHILE=str(flag))
    record = kit.tasks.record
    assert record.apply_async(("warm",), queue="busy").get(timeout=DEADLINE) == "warm"
    started = len(log.read_text(errors="replace"))  # the banner names the queues

    flag.touch()  # Redis refuses every fetch of 'stuck' made from now on
    planted = time.monotonic()
    # (a fetch made before, in flight behind an idle wait, is not refused: every
    # process that fetches has its own, and one still in flight would lease the task
    # sent to 'stuck' below; so each of them says its first refusal before it is sent)
    wait_until(lambda: log.read_text(errors="replace")[started:].count(
        "'stuck' set aside") >= fetching, timeout=DEADLINE,
        message=f"the first refused fetch of 'stuck' of each of the {fetching} "
                f"process(es) that fetch")
    waiting = record.apply_async(("stuck-task",), queue="stuck")
    for round_ in range(ROUNDS):
        sent = [record.apply_async((f"busy-{round_}-{i}",), queue="busy")
                for i in range(PER_ROUND)]
        assert [h.get(timeout=DEADLINE) for h in sent] == \
            [f"busy-{round_}-{i}" for i in range(PER_ROUND)]
    assert worker.poll() is None, "the worker lives on"
    assert kit.marks("done", "stuck-task") == [], "its queue was refused"
    assert kit.client.hvals(BUSY.deliveries) == [], "no busy task was handed out twice"

    text = log.read_text(errors="replace")[started:]
    about = lines_about_stuck(text)
    most = most_lines(fetching, time.monotonic() - planted)
    assert 1 <= len(about) <= most, f"{len(about)} lines, at most {most}: " + \
        "\n".join(about[:20])
    assert "'stuck' set aside" in about[0] and "WARNING" in about[0], about[0]
    assert "is back" not in text and "Traceback" not in text, text[-3000:]

    flag.unlink()  # fixed: the queue is served again, by itself
    assert waiting.get(timeout=DEADLINE) == "stuck-task"
    assert len(kit.marks("done", "stuck-task")) == 1

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    text = log.read_text(errors="replace")[started:]
    about = lines_about_stuck(text)
    most = most_lines(fetching, time.monotonic() - planted) + fetching
    assert len(about) <= most and "served again" in about[-1], "\n".join(about)
    assert "is back" not in text, text[-3000:]
    wait_until(lambda: kit.client.zcard(BUSY.leases) == 0, timeout=DEADLINE,
               message="no busy task left leased")
