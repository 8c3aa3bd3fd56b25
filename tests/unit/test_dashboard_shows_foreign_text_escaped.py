"""Every string the dashboard shows from Redis goes through ``printable``, as on a
terminal: an escape character or a bidirectional override planted in a worker's
host name, an error message, a progress message or a task id is shown as its
``\\x``/``\\u`` escape on every page, never interpreted; live.js escapes the JSON
API's strings the same way (run under node). A lease or due time that is no time
is shown as unreadable, naming its key, never as a time."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from typing import Any, Callable, Dict, List, Tuple
from urllib.parse import urlencode

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys, queue_keys
from minitask.dashboard.web import Dashboard, shown
from minitask.printable import printable
from minitask.wire.message import Message
from minitask.wire.serializer import encode_message, pack_progress
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
        # a form's hidden value holds the id itself, to post back: its characters as
        # references, but a C1 control raw (HTML reads most of their references as
        # other characters); it is no text on the page
        assert not [char for char in RAW if char in text and not "\x80" <= char <= "\x9f"]
        shown_text = re.sub(r'type="hidden" name="task_id" value="[^"]*"', "", text)
        assert not [char for char in RAW if char in shown_text], path
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


@pytest.mark.parametrize("action", ["requeue", "purge-dead"])
@pytest.mark.parametrize("raw", [raw for raw in PLANTED if raw.decode("utf-8", "ignore")
                                 .encode() == raw])  # not UTF-8: minitask dead purge
def test_a_dead_letter_holding_control_characters_is_acted_on_by_its_forms(
        planted: Tuple[Minitask, Dict[str, str]], redis_client: "redis.Redis[bytes]",
        raw: bytes, action: str) -> None:
    """The page shows the id escaped, and its forms (the row's, then the confirmation's)
    post back the id itself, HTML-escaped only: both steps reach the dead letter."""
    app, _ = planted
    dashboard = Dashboard(app)
    dead = queue_keys(app.name, "default").dead
    # a letter with no message, or one that cannot be decoded, is not requeued
    # (test_dead_requeue_says_what_it_did.py, test_dead_foreign_records.py)
    redis_client.hset(queue_keys(app.name, "default").messages, raw, encode_message(
        Message("plain-id", "t", [], {}, "default", 5, 1)))  # an id with a control
    # character is no message's: one that holds it cannot be decoded
    page = call(dashboard, "/dead")[2]
    row = page[page.index(f'<tr data-task-id="{html.escape(printable(raw))}">'):]
    form = row[row.index(f'action="/actions/{action}"'):]
    sent = hidden(form)
    assert sent["task_id"] == raw.decode()  # as Redis holds it, not as the page shows it
    assert "\x1b" not in form and "\u202e" not in form  # as character references
    status, _, asked = call(dashboard, f"/actions/{action}", "POST", urlencode(sent))
    assert status == "200 OK" and raw in redis_client.zrange(dead, 0, -1)  # asked only
    confirmed = hidden(asked[asked.index('<form id="confirm"'):])
    assert confirmed["task_id"] == raw.decode() and confirmed["confirm"] == "yes"
    status, headers, _ = call(dashboard, f"/actions/{action}", "POST", urlencode(confirmed))
    assert status == "303 See Other"
    said = call(dashboard, headers["Location"])[2]
    if action == "requeue":  # reached: its message names another id, so it stays (probe 18)
        assert "its message names another task id (plain-id)" in said, said
        assert raw in redis_client.zrange(dead, 0, -1)
    else:
        assert "purged 1 dead letter(s)" in said
        assert raw not in redis_client.zrange(dead, 0, -1)


def test_stop_on_a_task_id_no_task_can_have_sends_that_id_and_is_refused(
        planted: Tuple[Minitask, Dict[str, str]], redis_client: "redis.Redis[bytes]") -> None:
    """A leased id holding ESC (planted: minitask refuses such an id): its Stop form
    carries the id itself, and the action says that no task can have it, rather than
    asking about the escaped text (another id) and then cancelling nothing."""
    app, _ = planted
    planted_id = "run\x1b[31m-id"
    redis_client.zadd(queue_keys(app.name, "default").leases, {planted_id: 2 ** 40})
    dashboard = Dashboard(app)
    page = call(dashboard, "/running")[2]
    row = page[page.index(f'data-task-id="{printable(planted_id)}"'):]
    sent = hidden(row)
    assert sent["task_id"] == planted_id and sent["running"] == "1"
    status, _, body = call(dashboard, "/actions/cancel", "POST", urlencode(sent))
    assert status == "400 Bad Request" and "task_id" in body and "\x1b" not in body


def hidden(form: str) -> Dict[str, str]:
    """The hidden fields of the first form in ``form``, as a browser posts them."""
    form = form[:form.index("</form>")]
    return {name: as_browsers_read(value)
            for name, value in re.findall(r'type="hidden" name="([a-z_]+)" value="([^"]*)"',
                                          form)}


def as_browsers_read(value: str) -> str:
    """An attribute's text as a browser reads it: a decimal reference to a control
    character is that character (Python's ``html.unescape`` drops it)."""
    return "".join(chr(int(part[2:-1])) if re.fullmatch(r"&#[0-9]+;", part)
                   else html.unescape(part) for part in re.split(r"(&#[0-9]+;)", value))


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
