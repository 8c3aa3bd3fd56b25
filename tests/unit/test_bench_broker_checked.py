"""``minitask bench --broker URL`` checks the URL and reaches its Redis through
minitask's own connect() first: a bad URL, an unreachable Redis or a scheme the
bench cannot measure end with one line and the CLI's exit code; --start-server with
--broker is refused (issue 29, M6)."""
from __future__ import annotations

from typing import Any, List

import pytest

from minitask.bench import run as bench_run
from minitask.cli import main


@pytest.fixture(autouse=True)
def no_server(monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    """No redis-server is started and nothing is measured: what would be is noted."""
    started: List[Any] = []

    class Server:
        url = "redis://127.0.0.1:9/0"

        def __init__(self) -> None:
            started.append("server")

        def stop(self) -> None:
            started.append("stopped")

    class Measured:
        def __init__(self, url: str, **_: Any) -> None:
            started.append(url)

        def run(self) -> Any:
            raise SystemExit(0)

    monkeypatch.setattr(bench_run, "ThrowawayServer", Server)
    monkeypatch.setattr(bench_run, "Bench", Measured)
    monkeypatch.delenv("MINITASK_BROKER_URL", raising=False)
    return started


@pytest.mark.parametrize("url, code, said", [
    ("redis://127.0.0.1:1/0?foo=1", 2, "invalid broker URL 'redis://127.0.0.1:1/0?foo=1': "
                                       "unknown option 'foo'"),
    ("redis://127.0.0.1:1/0", 3, "could not reach the Redis to measure"),
    ("embedded://", 2, "measures one Redis server, at a redis://, rediss:// or unix:// URL"),
    ("redis+cluster://127.0.0.1:1", 2, "measures one Redis server"),
    ("no url", 2, "measures one Redis server"),
])
def test_a_url_the_bench_cannot_measure_ends_with_one_line(
        url: str, code: int, said: str, no_server: List[Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--broker", url]) == code
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert no_server == []


def test_start_server_with_broker_is_refused_before_starting_anything(
        no_server: List[Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--start-server", "--broker", "redis://127.0.0.1:6379/0"]) == 2
    assert "--broker and --start-server" in capsys.readouterr().err
    assert no_server == []


def test_start_server_wins_over_the_environments_url(
        no_server: List[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", "redis://127.0.0.1:1/0")
    with pytest.raises(SystemExit):
        main(["bench", "--start-server"])
    assert no_server == ["server", "redis://127.0.0.1:9/0", "stopped"]


def test_the_environments_url_is_checked_too(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", "redis://127.0.0.1:1/0?foo=1")
    assert main(["bench"]) == 2
    assert "unknown option 'foo'" in capsys.readouterr().err


@pytest.mark.integration
def test_a_reachable_redis_is_measured_at_its_url(no_server: List[Any], redis_server: Any) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--broker", redis_server.url])
    assert no_server == [redis_server.url]
