"""The dashboard's WSGI application, called directly on fakeredis (and the real
server): auth, CSRF, escaping, actions, JSON; the browser test is in
tests/integration/test_dashboard_browser.py."""
from __future__ import annotations

import base64
import io
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families

from minitask import Minitask
from minitask.dashboard import sections
from minitask.dashboard.sections import Section, register_section
from minitask.dashboard.web import Dashboard
from tests.support.draining import drain

SCRIPT = "<script>alert(1)</script>"


def call(dashboard: Dashboard, path: str, method: str = "GET", form: str = "",
         auth: Optional[str] = None, headers: Optional[Dict[str, str]] = None
         ) -> Tuple[str, Dict[str, str], str]:
    body = form.encode()
    path, _, query = path.partition("?")
    environ: Dict[str, Any] = {"REQUEST_METHOD": method, "PATH_INFO": path,
                               "QUERY_STRING": query, "wsgi.input": io.BytesIO(body),
                               "CONTENT_LENGTH": str(len(body)), "HTTP_HOST": "127.0.0.1:5555"}
    if auth is not None:
        environ["HTTP_AUTHORIZATION"] = "Basic " + base64.b64encode(auth.encode()).decode()
    environ.update(headers or {})
    seen: Dict[str, Any] = {}

    def start_response(status: str, response_headers: List[Tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(response_headers)

    text = b"".join(dashboard(environ, start_response)).decode()
    return seen["status"], seen["headers"], text


@pytest.fixture
def seeded(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Dict[str, str]]:
    app = make_app("shop")

    @app.task(retries=0)
    def explode(text: str) -> None:
        raise ValueError("boom")

    @app.task(queue="emails")
    def send(to: str) -> None:
        pass

    dead = explode.delay(SCRIPT)
    drain(app.worker(["default"]))
    send.apply_async(("a",), priority=9)
    send.apply_async(("b",), priority=2)
    send.apply_async(("c",), delay=3600)
    return app, {"dead": dead.id}


def test_pages_and_their_json_answer(seeded: Tuple[Minitask, Dict[str, str]]) -> None:
    app, ids = seeded
    dashboard = Dashboard(app)
    for page in ("/", "/workers", "/throughput", f"/task/{ids['dead']}", "/dead",
                 "/schedules", "/task"):
        status, headers, _ = call(dashboard, page)
        assert status == "200 OK", page
        # one script is allowed, by its hash: no inline script of a page's values
        policy = headers["Content-Security-Policy"]
        assert "script-src 'sha256-" in policy and "unsafe" not in policy.split("script-src")[1]
    status, _, text = call(dashboard, "/api/queues")
    queues = {q["queue"]: q for q in json.loads(text)["queues"]}
    assert (queues["emails"]["ready"], queues["emails"]["scheduled"],
            queues["emails"]["ready_by_priority"]) == (2, 1, {"9": 1, "2": 1})
    assert queues["default"]["dead"] == 1
    task = json.loads(call(dashboard, f"/api/task/{ids['dead']}")[2])["task"]
    assert (task["status"], task["args"], task["exc_type"]) == ("failed", [SCRIPT], "ValueError")
    assert "ValueError: boom" in task["traceback"]
    assert call(dashboard, "/nowhere")[0] == "404 Not Found"


def test_every_page_has_a_json_twin_with_its_data(
        seeded: Tuple[Minitask, Dict[str, str]], clock: Any) -> None:
    app, ids = seeded
    app.broker.registry.heartbeat("w1", {"pid": 42, "host": "box", "queues": "default",
                                         "pool": "thread", "concurrency": 2,
                                         "processed": 7, "beat_ms": clock.now_ms()},
                                  clock.now_ms(), ttl_ms=60_000)
    worker = app.worker(["emails"])
    drain(worker)
    worker.beat()  # it adds its counts
    dashboard = Dashboard(app)

    def api(page: str) -> Any:
        status, headers, text = call(dashboard, "/api/" + page)
        assert status == "200 OK" and headers["Content-Type"] == "application/json", page
        return json.loads(text)

    workers = {w["name"]: w for w in api("workers")["workers"]}
    assert (workers["w1"]["processed"], workers["w1"]["host"]) == (7, "box")
    assert len(workers) == 2  # and the worker that beat
    assert workers["w1"]["heartbeat_age_s"] == 0.0
    throughput = api("throughput")
    assert throughput["totals"] == {"emails": 2} and len(throughput["minutes"]) == 60
    assert [line["queue"] for line in throughput["lines"]] == ["emails"]
    dead = api("dead")
    assert [d["task_id"] for d in dead["dead"]] == [ids["dead"]]
    assert dead["dead"][0]["args"] == repr(SCRIPT)  # as short text, as other listings
    listed = api("schedules")
    assert (listed["app"], listed["schedules"], listed["total"], listed["next"]) == (
        "shop", [], 0, None)
    assert api("task?id=nothing-here")["task"] is None


def test_every_value_is_escaped(seeded: Tuple[Minitask, Dict[str, str]]) -> None:
    app, ids = seeded
    dashboard = Dashboard(app)
    for page in (f"/task/{ids['dead']}", "/dead", f"/task?id={SCRIPT}"):
        text = call(dashboard, page)[2]
        assert "<script" not in text, page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text, page


def test_basic_auth_is_required_when_configured(
        seeded: Tuple[Minitask, Dict[str, str]]) -> None:
    app, _ = seeded
    dashboard = Dashboard(app, auth="admin:s3cret")
    for page in ("/", "/metrics", "/api/queues"):
        status, headers, _ = call(dashboard, page)
        assert status == "401 Unauthorized"
        assert headers["WWW-Authenticate"].startswith("Basic")
        assert call(dashboard, page, auth="admin:wrong")[0] == "401 Unauthorized"
        assert call(dashboard, page, auth="admin:s3cret")[0] == "200 OK"
    status, _, _ = call(dashboard, "/dead/requeue", "POST", "task_id=x")
    assert status == "401 Unauthorized"


def test_actions_need_the_csrf_token_and_a_same_site_origin(
        seeded: Tuple[Minitask, Dict[str, str]]) -> None:
    app, ids = seeded
    dashboard = Dashboard(app)
    form = f"task_id={ids['dead']}"
    assert call(dashboard, "/dead/requeue", "POST", form)[0] == "403 Forbidden"
    assert call(dashboard, "/dead/requeue", "POST", form + "&csrf=guess")[0] == "403 Forbidden"
    other = Dashboard(app)  # another server's token is no good here
    assert call(dashboard, "/dead/requeue", "POST",
                form + f"&csrf={other.csrf_token}")[0] == "403 Forbidden"
    assert call(dashboard, "/dead/requeue", "POST", form + f"&csrf={dashboard.csrf_token}",
                headers={"HTTP_ORIGIN": "http://evil.example"})[0] == "403 Forbidden"
    call(dashboard, f"/dead/requeue?task_id={ids['dead']}&csrf={dashboard.csrf_token}")
    assert app.handle(ids["dead"]).status() == "failed"  # a GET changes nothing
    status, headers, _ = call(dashboard, "/dead/requeue", "POST",
                              form + f"&confirm=yes&csrf={dashboard.csrf_token}",
                              headers={"HTTP_ORIGIN": "http://127.0.0.1:5555"})
    assert status == "303 See Other" and headers["Location"].startswith("/dead?notice=")
    assert app.handle(ids["dead"]).status() == "queued"
    assert app.dead_letters() == []


def test_the_former_dead_letter_paths_ask_first_as_every_action_does(
        seeded: Tuple[Minitask, Dict[str, str]]) -> None:
    """/dead/requeue and /dead/purge (older pages posted there) are the actions
    requeue and purge-dead: a page asking to confirm, whose form posts to the action."""
    app, ids = seeded
    dashboard = Dashboard(app)
    for path, form in (("/dead/requeue", f"task_id={ids['dead']}"),
                       ("/dead/purge", f"task_id={ids['dead']}"),
                       ("/dead/purge", "queue=default")):
        status, _, page = call(dashboard, path, "POST", f"{form}&csrf={dashboard.csrf_token}")
        assert status == "200 OK" and 'id="question"' in page, path
        action = "requeue" if path.endswith("requeue") else "purge-dead"
        assert f'<form id="confirm" method="post" action="/actions/{action}">' in page
        assert 'name="back" value="/dead"' in page
        assert app.handle(ids["dead"]).status() == "failed"  # asked, not done
    assert call(dashboard, "/dead/elsewhere", "POST",
                f"task_id=x&csrf={dashboard.csrf_token}")[0] == "404 Not Found"


def test_purge_from_the_page_deletes_dead_letters(
        seeded: Tuple[Minitask, Dict[str, str]]) -> None:
    app, ids = seeded
    dashboard = Dashboard(app)
    status, _, _ = call(dashboard, "/actions/purge-dead", "POST",
                        f"queue=default&confirm=yes&csrf={dashboard.csrf_token}")
    assert status == "303 See Other"
    assert app.dead_letters() == []
    assert call(dashboard, "/actions/purge-dead", "POST",
                f"queue=bad{{name&csrf={dashboard.csrf_token}")[0] == "400 Bad Request"
    # a broadcast subscriber's lane (queue:subscriber) is a queue of its own here
    assert call(dashboard, "/dead?queue=default%3As1")[0] == "200 OK"
    # purging one no worker ever pulled into is refused: it would say "purged 0"
    assert call(dashboard, "/actions/purge-dead", "POST",
                f"queue=default%3As1&confirm=yes&csrf={dashboard.csrf_token}"
                )[0] == "400 Bad Request"
    app.broker.queues.register_queues(["default:s1"], lanes=True)
    assert call(dashboard, "/actions/purge-dead", "POST",
                f"queue=default%3As1&confirm=yes&csrf={dashboard.csrf_token}"
                )[0] == "303 See Other"
    assert call(dashboard, "/dead?queue=default%3Abad%7Bname")[0] == "400 Bad Request"


def test_a_feature_plugs_a_section_in(seeded: Tuple[Minitask, Dict[str, str]],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = seeded
    monkeypatch.setattr(sections, "_SECTIONS", {})  # this test's sections only
    register_section(Section("test-extra", "Test extra", ["name", "value"],
                             lambda app: [{"name": app.name, "value": SCRIPT}]))
    dashboard = Dashboard(app)
    assert 'href="/section/test-extra"' in call(dashboard, "/")[2]
    status, _, text = call(dashboard, "/section/test-extra")
    assert status == "200 OK" and "&lt;script&gt;" in text and "<td>shop</td>" in text
    assert json.loads(call(dashboard, "/api/section/test-extra")[2])["rows"][0]["name"] == "shop"
    assert call(dashboard, "/section/none")[0] == "404 Not Found"


def test_the_subscribers_page_lists_each_broadcast_queues_subscribers_with_their_lag(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")

    @app.task(broadcast=True, queue="config")
    def reload(version: int) -> None:
        pass

    now_ms = int(app.clock.now_ms())
    app.broker.broadcasts.subscribe("config", "web-1", now_ms)
    app.broker.broadcasts.subscribe("config", SCRIPT, now_ms)  # a hostile name, escaped
    reload.delay(7)
    reload.delay(8)
    dashboard = Dashboard(app)
    assert 'href="/section/subscribers"' in call(dashboard, "/")[2]
    status, _, text = call(dashboard, "/section/subscribers")
    assert status == "200 OK" and "<td>web-1</td>" in text and "&lt;script&gt;" in text
    rows = json.loads(call(dashboard, "/api/section/subscribers")[2])["rows"]
    assert {(row["queue"], row["subscriber"], row["lag"]) for row in rows} == {
        ("config", "web-1", 2), ("config", SCRIPT, 2)}


def test_metrics_and_the_queue_page_count_the_same_ready_tasks_parked_and_cancelled(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    """/metrics counts tasks parked by their limits as ready, as the page and
    ``minitask status`` do, and neither counts a cancelled task still in a list."""
    app = make_app("shop")

    @app.task(rate_limit="5/s", name="limited")
    def limited(n: int) -> int:
        return n

    @app.task(queue="emails", name="send")
    def send(n: int) -> int:
        return n

    limited.delay_many([(n,) for n in range(10)])
    sent = send.delay_many([(n,) for n in range(3)])
    assert sent[1].cancel()
    leased = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                     count=10, max_deliveries=5)
    assert len(leased.deliveries) == 1  # one start; the rate parks the other nine
    dashboard = Dashboard(app)
    page = {q["queue"]: q for q in json.loads(call(dashboard, "/api/queues")[2])["queues"]}
    assert (page["default"]["ready"], page["default"]["parked"],
            page["default"]["running"]) == (9, 9, 1)
    assert (page["emails"]["ready"], page["emails"]["ready_by_priority"]) == (2, {"5": 2})
    gauges = {tuple(sorted(sample.labels.items())): sample.value
              for family in text_string_to_metric_families(call(dashboard, "/metrics")[2])
              for sample in family.samples if sample.name == "minitask_queue_tasks"}
    assert gauges[("queue", "default"), ("state", "ready")] == 9
    assert gauges[("queue", "default"), ("state", "running")] == 1
    assert gauges[("queue", "emails"), ("state", "ready")] == 2


def test_the_dead_letter_page_reads_at_most_its_limit_over_all_queues(
        make_app: Callable[..., Minitask], monkeypatch: pytest.MonkeyPatch) -> None:
    from minitask.dashboard import views
    monkeypatch.setattr(views, "DEAD_LIMIT", 3)
    app = make_app("shop")
    for queue in ("a", "b", "c"):
        app.task(name=f"fail.{queue}", queue=queue, retries=0)(_fail).delay_many(
            [(n,) for n in range(2)])
        drain(app.worker([queue]))
    read: List[int] = []
    rows = views.dead_rows

    def counted(app: Minitask, queue: Optional[str] = None, *, limit: int = 1000) -> Any:
        found = rows(app, queue, limit=limit)
        read.append(len(found))
        return found

    monkeypatch.setattr(views, "dead_rows", counted)
    data = views.dead(app)
    assert [d["queue"] for d in data["dead"]] == ["a", "a", "b"]
    assert sum(read) == 3 and data["counts"] == {"a": 2, "b": 2, "c": 2, "default": 0}
    assert len(views.dead(app, "c")["dead"]) == 2


def _fail(n: int) -> None:
    raise ValueError(n)


def test_without_auth_a_loopback_dashboard_answers_to_loopback_names_only(
        seeded: Tuple[Minitask, Dict[str, str]]) -> None:
    """DNS rebinding: evil.example resolving to 127.0.0.1 must not read the pages (the
    CSRF token among them) as a site of its own."""
    app, ids = seeded
    local = Dashboard(app, loopback=True)
    for host in ("127.0.0.1:5555", "localhost:5555", "[::1]:5555", "127.0.0.2"):
        assert call(local, "/", headers={"HTTP_HOST": host})[0] == "200 OK", host
    for host in ("evil.example:5555", "evil.example", "127.0.0.1.evil.example", "[::1"):
        for page in ("/", "/api/queues", "/metrics"):
            assert call(local, page, headers={"HTTP_HOST": host})[0] == "403 Forbidden"
    status, _, _ = call(local, "/dead/requeue", "POST",
                        f"task_id={ids['dead']}&csrf={local.csrf_token}",
                        headers={"HTTP_HOST": "evil.example:5555"})
    assert status == "403 Forbidden" and app.handle(ids["dead"]).status() == "failed"
    # with auth, a rebound name has no credentials; bound elsewhere, any name may serve
    assert call(Dashboard(app, auth="a:b", loopback=True), "/", auth="a:b",
                headers={"HTTP_HOST": "evil.example"})[0] == "200 OK"
    assert call(Dashboard(app), "/", headers={"HTTP_HOST": "dash.example"})[0] == "200 OK"


def test_the_server_knows_when_it_listens_on_loopback_only(
        seeded: Tuple[Minitask, Dict[str, str]]) -> None:
    from minitask.dashboard.server import make
    app, _ = seeded
    for host, local in (("127.0.0.1", True), ("localhost", True), ("0.0.0.0", False)):
        server = make(app, host, 0)
        try:
            assert server.get_app().local_names_only is local, host  # type: ignore[attr-defined]
        finally:
            server.server_close()


class FakeServer:
    server_port = 5555

    def serve_forever(self) -> None:
        pass

    def server_close(self) -> None:
        pass


@pytest.mark.parametrize("argv, env, expected", [
    ([], None, ("127.0.0.1", 5555, None)),
    ([], "admin:from-env", ("127.0.0.1", 5555, "admin:from-env")),
    (["--auth", "admin:given", "--host", "0.0.0.0", "--port", "8080"], "admin:from-env",
     ("0.0.0.0", 8080, "admin:given")),
])
def test_the_dashboard_command_binds_loopback_and_takes_auth_from_option_or_env(
        monkeypatch: pytest.MonkeyPatch, argv: List[str], env: Optional[str],
        expected: Tuple[str, int, Optional[str]]) -> None:
    from minitask.cli import main
    from minitask.dashboard import server
    made: List[Tuple[str, int, Optional[str]]] = []

    def make(app: Minitask, host: str, port: int, auth: Optional[str]) -> FakeServer:
        made.append((host, port, auth))
        return FakeServer()

    monkeypatch.setattr(server, "make", make)
    if env is None:
        monkeypatch.delenv("MINITASK_DASHBOARD_AUTH", raising=False)
    else:
        monkeypatch.setenv("MINITASK_DASHBOARD_AUTH", env)
    assert main(["dashboard", "-A", "tests.apps.basic", *argv]) == 0
    assert made == [expected]


def test_the_dashboard_command_refuses_auth_without_a_password(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from minitask.cli import main
    monkeypatch.setenv("MINITASK_DASHBOARD_AUTH", "admin")
    assert main(["dashboard", "-A", "tests.apps.basic"]) != 0
