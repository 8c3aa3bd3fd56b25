"""Reading a dashboard page in-process, as a WSGI server would hand the request over."""
from __future__ import annotations

import io
from typing import Any, Dict, List, Tuple

from minitask.dashboard.web import Dashboard


def get(dashboard: Dashboard, path: str) -> Tuple[str, str]:
    """A page's status and text; ``path`` as a WSGI server hands it over (PEP 3333:
    the bytes the client sent, decoded as Latin-1)."""
    seen: Dict[str, str] = {}

    def start_response(status: str, headers: List[Tuple[str, str]]) -> None:
        seen["status"] = status

    environ: Dict[str, Any] = {
        "REQUEST_METHOD": "GET", "PATH_INFO": path.encode().decode("latin-1"),
        "QUERY_STRING": "", "wsgi.input": io.BytesIO(b""), "CONTENT_LENGTH": "0",
        "HTTP_HOST": "127.0.0.1:5555"}
    body = b"".join(dashboard(environ, start_response)).decode()
    return seen["status"], body
