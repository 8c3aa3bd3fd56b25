"""``?retry_on_error=`` names exception classes, which a URL cannot give: redis-py made
the list of the text's characters of it, and every connection error then raised a
TypeError of its own ("catching classes that do not inherit from BaseException") at
``minitask status``, worker start and ``delay()`` (issue 29, probe35 M3)."""
from __future__ import annotations

import pytest

from minitask import ConfigurationError
from minitask.broker.connection import connect


@pytest.mark.parametrize("url", [
    "redis://127.0.0.1:1/0?retry_on_error=ConnectionError",
    "redis+sentinel://127.0.0.1:1/mymaster?retry_on_error=x",
], ids=repr)
def test_retry_on_error_is_refused_by_name(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        connect(url)
    said = str(caught.value)
    assert "'retry_on_error' cannot be given in a URL" in said
    assert "a list of exception classes" in said
