"""``LogThrottle``: a key's line is said at once, then at most ``lines`` a window of
``every`` seconds, each line counting what was held back since the one before; on a
clock the test moves (no sleeps)."""
from __future__ import annotations

import threading
import time

import pytest

from minitask.log_throttle import LogThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def test_the_first_line_is_said_at_once_and_the_next_counts_those_held_back() -> None:
    clock = Clock()
    throttle = LogThrottle(60.0, clock=clock)
    assert throttle.note("q") == 1
    clock.now += 30
    assert [throttle.note("q") for _ in range(3)] == [0, 0, 0]
    assert throttle.note("q", 5) == 0
    clock.now += 29.999
    assert throttle.note("q") == 0  # 59.999 s after the line
    clock.now += 0.001
    assert throttle.note("q", 2) == 1 + 3 + 5 + 2  # 60 s: held back, then these
    assert throttle.note("q") == 0  # a new minute, from that line


def test_keys_are_paced_apart() -> None:
    clock = Clock()
    throttle = LogThrottle(60.0, clock=clock)
    assert throttle.note("a") == 1 and throttle.note("b") == 1 and throttle.note() == 1
    assert throttle.note("a") == 0 and throttle.note("b") == 0 and throttle.note(None) == 0
    assert len(throttle) == 3


def test_a_window_holds_lines_then_counts_the_rest_into_the_next() -> None:
    clock = Clock()
    throttle = LogThrottle(60.0, lines=3, clock=clock)
    assert [throttle.note("k", 2) for _ in range(5)] == [2, 2, 2, 0, 0]
    clock.now += 59
    assert throttle.note("k") == 0  # the window began with its first line
    clock.now += 1
    assert throttle.note("k", 2) == 2 + 2 + 1 + 2


def test_a_count_of_nothing_says_what_was_held_back_once_due() -> None:
    clock = Clock()
    throttle = LogThrottle(60.0, clock=clock)
    assert throttle.note("q", 0) == 0  # nothing held: nothing said, no window begun
    assert throttle.note("q") == 1
    clock.now += 60
    assert throttle.note("q", 0) == 0  # due, but nothing to say: the next is said at once
    assert throttle.note("q") == 1
    assert throttle.note("q") == 0
    clock.now += 10
    assert throttle.note("q", 0) == 0
    clock.now += 50
    assert throttle.note("q", 0) == 1  # (a heartbeat asking)


def test_a_clock_gone_back_says_at_once_never_stuck() -> None:
    clock = Clock()
    throttle = LogThrottle(60.0, clock=clock)
    assert throttle.note("q") == 1
    assert throttle.note("q") == 0
    clock.now -= 3600  # an app's clock set back an hour
    assert throttle.note("q") == 2
    assert throttle.note("q") == 0


def test_since_is_the_time_since_the_keys_last_line() -> None:
    clock = Clock()
    throttle = LogThrottle(60.0, clock=clock)
    throttle.note("q")
    clock.now += 12.5
    throttle.note("q")
    assert throttle.since("q") == 12.5
    clock.now += 50
    assert throttle.note("q") == 2 and throttle.since("q") == 0.0


def test_forget_gives_what_was_held_back_and_the_next_line_is_said_at_once() -> None:
    clock = Clock()
    throttle = LogThrottle(60.0, clock=clock)
    assert throttle.forget("q") == 0  # never noted
    throttle.note("q")
    throttle.note("q", 4)
    assert throttle.forget("q") == 4
    assert throttle.forget("q") == 0 and len(throttle) == 0
    assert throttle.note("q") == 1


def test_memory_stays_bounded_forgetting_the_least_recently_noted_key() -> None:
    clock = Clock()
    throttle = LogThrottle(60.0, keys=3, clock=clock)
    for key in "abc":
        throttle.note(key)
    throttle.note("a")  # noted last: kept
    throttle.note("d")  # "b" forgotten
    assert len(throttle) == 3
    assert throttle.note("a") == 0 and throttle.note("c") == 0
    assert throttle.note("b") == 1  # forgotten: said at once ("d" goes now)
    assert len(throttle) == 3


def test_shared_slots_make_throttles_of_two_processes_say_one_line() -> None:
    clock, shared = Clock(), [0.0, 0.0, 0.0]  # (a process pool's shared array, in the pool)
    supervisor = LogThrottle(60.0, clock=clock, slots=lambda: shared)
    child = LogThrottle(60.0, clock=clock, slots=lambda: shared)
    assert child.note() == 1
    assert supervisor.note() == 0 and child.note() == 0
    clock.now += 60
    assert supervisor.note(None, 0) == 2
    child.note(None, 3)
    assert supervisor.forget() == 3  # forgotten for both
    assert child.note() == 1


def test_a_lock_given_is_held_around_each_call() -> None:
    lock, held = threading.Lock(), []

    def clock() -> float:
        held.append(lock.locked())
        return 0.0

    throttle = LogThrottle(60.0, clock=clock, lock=lock)
    throttle.note("q")
    throttle.since("q")
    assert held == [True, True] and not lock.locked()


def test_its_default_clock_is_the_monotonic_clock_read_at_each_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    throttle = LogThrottle(60.0)  # made before the clock is patched
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    assert throttle.note() == 1 and throttle.note() == 0
    now[0] += 60
    assert throttle.note() == 2
