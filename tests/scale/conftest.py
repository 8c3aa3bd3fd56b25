"""Fixtures of the scale tests: a real cluster per module, kits that own workers."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import pytest

from tests.support.processes import Processes
from tests.support.reports import did_fail
from tests.support.scale_kit import ScaleKit, unique_app
from tests.support.servers import RedisServer
from tests.support.topologies import Cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three primaries on free ports, slots split evenly; shared by a module's tests,
    each of which uses an app name of its own."""
    found = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        found.start()
        yield found
    finally:
        found.stop()


@pytest.fixture
def make_kit(processes: Processes, redis_server: RedisServer, tmp_path: Path,
             request: pytest.FixtureRequest) -> Iterator[Callable[..., ScaleKit]]:
    """Kits on a broker of the test's choosing; worker logs are printed on failure."""
    kits: List[ScaleKit] = []

    def make(broker: Any, worker_url: str, prefix: str = "s",
             durability: Optional[str] = None) -> ScaleKit:
        kit = ScaleKit(broker, worker_url, redis_server, processes, tmp_path, unique_app(prefix),
                       durability=durability)
        kits.append(kit)
        return kit

    try:
        yield make
    finally:
        failed = did_fail(request)
        processes.kill_all()
        for kit in kits:
            if failed:
                kit.print_logs()
            kit.close()
