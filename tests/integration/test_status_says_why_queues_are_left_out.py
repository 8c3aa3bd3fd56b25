"""``minitask status`` says why it leaves queues of the registry out (probe29r L1): with
four planted members that name no queue (an escape, a space, bytes that are not UTF-8,
a newline) it said "... and 4 more queue(s) ... not shown (only the queues the app
declares and 100 others are)", blaming its cap for names it left out as invalid. Now
each reason is counted apart, in the text and in ``--json``. On the suite's
redis-server, the CLI run in-process."""
from __future__ import annotations

import contextlib
import io
import json
from typing import Tuple

import pytest
import redis

from minitask import Minitask
from minitask.admin import SHOWN_OTHERS
from minitask.broker.keys import AppKeys
from minitask.cli.main import main
from tests.apps.foreign import build

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
REGISTRY = AppKeys("foreign")
PLANTED = [b"bad\x1b[31mq", b"sp ace", b"\xff\xfe", b"ok\nFORGED"]


def cli(*argv: str) -> Tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


def test_names_left_out_as_invalid_are_not_blamed_on_the_cap(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    app.broker.queues.register_queues(["other"])
    admin.sadd(REGISTRY.queues, *PLANTED)
    code, said = cli("status", "-A", APP, "--json")
    assert code == 0, said
    report = json.loads(said)
    assert report["queues_left_out"] == 4
    assert report["queues_left_out_why"] == {"past_limit": 0, "not_a_queue_name": 4}
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    line = next(line for line in said.splitlines() if "not shown" in line and "queue" in line)
    assert "4 that name no queue" in line, line
    assert "limit" not in line and f"{SHOWN_OTHERS} others" not in line, line
    assert "\x1b" not in said and "\nFORGED" not in said


def test_names_past_the_cap_are_said_as_such_beside_invalid_ones(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.sadd(REGISTRY.queues, *[f"q{n:04d}" for n in range(SHOWN_OTHERS + 30)])
    admin.sadd(REGISTRY.queues, *PLANTED)
    code, said = cli("status", "-A", APP, "--json")
    assert code == 0, said
    why = json.loads(said)["queues_left_out_why"]
    # the planted ones among those read are invalid; the rest are past the cap
    assert why["past_limit"] >= 30 - len(PLANTED) and why["past_limit"] + why[
        "not_a_queue_name"] == json.loads(said)["queues_left_out"]
    code, said = cli("status", "-A", APP)
    assert f"past the listing's limit (only the queues the app declares and {SHOWN_OTHERS} " \
           f"others are shown)" in said, said
