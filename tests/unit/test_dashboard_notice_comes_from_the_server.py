"""The notice banner shows only what an action of this dashboard did: text put in
the URL shows nothing."""
from __future__ import annotations

import io
from typing import Any, Callable, Dict, List, Tuple

from minitask import Minitask
from minitask.dashboard.web import Dashboard


def _call(dashboard: Dashboard, path: str, method: str = "GET",
          form: str = "") -> Tuple[str, Dict[str, str], str]:
    body = form.encode()
    path, _, query = path.partition("?")
    environ: Dict[str, Any] = {"REQUEST_METHOD": method, "PATH_INFO": path,
                               "QUERY_STRING": query, "wsgi.input": io.BytesIO(body),
                               "CONTENT_LENGTH": str(len(body)), "HTTP_HOST": "127.0.0.1:5555"}
    seen: Dict[str, Any] = {}

    def start_response(status: str, headers: List[Tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    text = b"".join(dashboard(environ, start_response)).decode()
    return seen["status"], seen["headers"], text


def test_a_notice_in_the_url_is_not_shown(make_app: Callable[..., Minitask]) -> None:
    dashboard = Dashboard(make_app("shop"))
    _, _, page = _call(dashboard, "/?notice=Your+session+expired%2C+call+555-0100")
    assert "555-0100" not in page
    assert 'id="notice"' not in page


def test_the_notice_of_an_action_is_shown_on_the_page_it_leads_to(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app("shop")
    dashboard = Dashboard(app)
    status, headers, _ = _call(dashboard, "/actions/purge-dead", "POST",
                               f"queue=default&confirm=yes&csrf={dashboard.csrf_token}")
    assert status == "303 See Other"
    _, _, page = _call(dashboard, headers["Location"])
    assert "purged 0 dead letter(s)" in page
