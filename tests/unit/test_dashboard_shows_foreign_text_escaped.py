"""Every string the dashboard shows from Redis goes through ``printable``, as on a
terminal: an escape character or a bidirectional override planted in a worker's
host name, an error message, a progress message or a task id is shown as its
``\\x``/``\\u`` escape on every page, never interpreted; live.js escapes the JSON
API's strings the same way (run under node). A lease or due time that is no time
is shown as unreadable, naming its key, never as a time."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.dashboard.web import Dashboard, shown
from minitask.printable import printable
from minitask.wire.serializer import pack_progress
from tests.support.draining import drain
from tests.support.paths import ROOT
from tests.unit.test_dashboard import call
from tests.unit.test_foreign_records_read_as_they_are import PLANTED, plant_dead

#: What must never reach a page raw: C0 and C1 controls, DEL, bidi overrides and
#: isolates, line separators, a zero-width joiner.
RAW = ["\x1b", "\x07", "\x00", "\x7f", "\x85", "\u202e", "\u202d", "\u2066", "\u2069",
       "\u200f", "\u2028", "\u061c", "\u200d", "\ufeff"]
HOSTILE = "x\x1b[31mred\u202eexe.txt\u2066\x07\x00\x85\u2028end"
PAGES = ["/", "/queues", "/workers", "/worker/w1", "/running", "/scheduled", "/recent",
         "/dead", "/schedules", "/throughput"]


@pytest.fixture
def planted(make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]"
            ) -> Tuple[Minitask, Dict[str, str]]:
    """An app whose worker, outcomes, progress and dead letters hold hostile text."""
    app = make_app("shop")

    @app.task(name="shop.boom", retries=0)
    def boom(text: str) -> None:
        raise ValueError(text)

    @app.task(name="shop.add")
    def add(a: Any, b: Any) -> Any:
        return a + b

    dead = boom.delay(HOSTILE)
    worker = app.worker(["default"], name="w1")
    drain(worker)
    worker.beat()
    (record,) = redis_client.keys(AppKeys(app.name).worker("*"))
    redis_client.hset(record, mapping={"host": HOSTILE, "queues": "default\u202e", "pool": "\x1b"})
    running = add.delay(HOSTILE, 1)
    app.broker.queues.fetch("default", now_ms=app.clock.now_ms(), lease_ms=30_000, count=10,
                            max_deliveries=5)
    app.broker.progress.write([("default", running.id, pack_progress(
        1, 2, HOSTILE, app.clock.now_ms()), 60_000)])
    add.apply_in(60, HOSTILE, 2)
    for raw in PLANTED[1:]:
        plant_dead(redis_client, app, raw)
    return app, {"dead": dead.id, "running": running.id}


def test_no_page_shows_a_control_character_raw(
        planted: Tuple[Minitask, Dict[str, str]]) -> None:
    app, ids = planted
    dashboard = Dashboard(app)
    pages = PAGES + [f"/task/{ids['dead']}", f"/task/{ids['running']}"]
    for path in pages:
        status, _, page = call(dashboard, path)
        assert status == "200 OK", path
        script = "".join(re.findall(r"<script>.*?</script>", page, re.S))
        text = page.replace(script, "")
        assert not [char for char in RAW if char in text], path
    worker_page = call(dashboard, "/worker/w1")[2]
    assert printable(HOSTILE, keep_newlines=True) in worker_page  # escaped, and still shown
    assert "default\\u202e" in worker_page and "\\x1b" in worker_page
    assert printable("ValueError: " + HOSTILE, keep_newlines=True) in call(
        dashboard, f"/task/{ids['dead']}")[2]
    assert printable(HOSTILE) in call(dashboard, "/running")[2]  # the progress message
    dead_page = call(dashboard, "/dead")[2]
    for raw in PLANTED[1:]:
        assert printable(raw) in dead_page


def test_the_json_api_keeps_the_data_as_it_is(planted: Tuple[Minitask, Dict[str, str]]
                                              ) -> None:
    """The API is data: JSON escapes control characters itself; live.js escapes what
    it shows (below)."""
    app, ids = planted
    dashboard = Dashboard(app)
    (found,) = json.loads(call(dashboard, "/api/workers")[2])["workers"]
    assert found["host"] == HOSTILE
    (row,) = json.loads(call(dashboard, "/api/running")[2])["tasks"]
    assert row["progress"]["message"] == HOSTILE


@pytest.mark.parametrize("raw", [raw for raw in PLANTED if raw.decode("utf-8", "ignore")
                                 .encode() == raw])  # not UTF-8: minitask dead purge
def test_a_dead_letter_shown_escaped_is_purged_by_its_form(
        planted: Tuple[Minitask, Dict[str, str]], redis_client: "redis.Redis[bytes]",
        raw: bytes) -> None:
    """The page's form sends the id as the page showed it: read back as Redis holds it."""
    app, _ = planted
    dashboard = Dashboard(app)
    form = f"csrf={dashboard.csrf_token}&task_id=" + printable(raw).replace(
        "\\", "%5C").replace("+", "%2B")
    status, headers, _ = call(dashboard, "/dead/purge", "POST", form)
    assert status.startswith("303")
    notice = call(dashboard, headers["Location"])[2]
    assert "purged 1 dead letter(s)" in notice
    assert raw not in redis_client.zrange(queue_keys(app.name, "default").dead, 0, -1)


@pytest.mark.parametrize("score", [float("inf"), 1e300, 1.5, 0.0, 99_999_999_999_999_990,
                                   2_218_453_920_000_000])  # the last: the year 9000
def test_a_lease_that_is_no_time_is_unreadable_naming_its_key_never_a_time(
        planted: Tuple[Minitask, Dict[str, str]], redis_client: "redis.Redis[bytes]",
        score: float) -> None:
    app, ids = planted
    leases = queue_keys(app.name, "default").leases
    redis_client.zadd(leases, {ids["running"]: score})
    dashboard = Dashboard(app)
    (row,) = json.loads(call(dashboard, "/api/running")[2])["tasks"]
    assert row["at"] is None and leases in row["unreadable"], row
    page = call(dashboard, "/running")[2]
    assert f"unreadable: its lease deadline in key {leases}" in page
    task = json.loads(call(dashboard, f"/api/task/{ids['running']}")[2])["task"]
    assert task["lease_until"] is None and leases in task["note"], task
    assert f"its lease deadline in key {leases}" in call(dashboard,
                                                         f"/task/{ids['running']}")[2]


def test_markup_this_package_wrote_is_left_as_it_is() -> None:
    from markupsafe import Markup
    assert shown(Markup("<b>\n</b>")) == "<b>\n</b>"
    assert shown("a\nb\u202e") == "a\nb\\u202e" and shown(3) == 3


def _live_js_shown() -> str:
    script = (ROOT / "minitask" / "dashboard" / "templates" / "live.js").read_text()
    found = re.search(r"\n  var HIDDEN = .*?\n  function shown\(value\) \{.*?\n  \}\n", script,
                      re.S)
    assert found, "live.js has no shown()"
    return found.group(0)


def test_live_js_puts_every_string_it_shows_through_shown() -> None:
    script = (ROOT / "minitask" / "dashboard" / "templates" / "live.js").read_text()
    assert "innerHTML" not in script
    writes: List[str] = re.findall(r"(?:textContent = |createTextNode\()([^;]*)", script)
    assert writes
    for expression in writes:
        fields = re.findall(r"\b(?:t|p|data)\.\w+", expression)
        assert not fields or "shown(" in expression or fields in (
            ["data.total"], ["data.tasks"]), expression


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_live_js_escapes_as_the_pages_do() -> None:
    samples = [HOSTILE, "plain text", "tab\there", "\ud800lone", "emoji \U0001f600 ok",
               "\U000e0001tag", "nbsp\xa0", "zw\u200bsp", "\U0010fffd private", "a\nb", ""]
    program = (_live_js_shown() + "process.stdout.write(JSON.stringify("
               + json.dumps(samples) + ".map(shown)));")
    done = subprocess.run(["node", "-e", program], capture_output=True, text=True,
                          timeout=60, check=True)
    assert json.loads(done.stdout) == [shown(sample) for sample in samples]
