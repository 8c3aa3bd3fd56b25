"""A planted newest entry of a queue's record of recent outcomes no longer moves the
listing's cap (issue 29, LOW). Each entry carries its writer's ``recent_outcomes`` as
field ``n``, and a listing shows the newest n only (Redis keeps up to a stream node
more: MAXLEN ~). Now the reading app's own ``recent_outcomes`` is the cap of its
listings (n is read only by an app that keeps no record, and only a whole number from
1 to the most an app keeps): before, a planted n of 1 hid every outcome but the
newest, and one of 1e300 (or 1,000,000) let the listing show past the app's cap.
On the suite's redis-server."""
from __future__ import annotations

from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.admin import recent
from minitask.broker.keys import AppKeys, queue_keys
from minitask.stores.recent import pack_entry

pytestmark = [pytest.mark.integration,
              pytest.mark.app("capped", on="server", recent_outcomes=5)]

#: Entries a writer of the app's cap added (its n: 5), before the planted one.
WRITTEN = 3


def _record(app: Minitask, planted_n: Any, more: int = 0) -> None:
    """WRITTEN (+ ``more``) entries as the app's workers write them, then a newest one
    whose n is ``planted_n``."""
    client: "redis.Redis[bytes]" = app.broker.client
    client.sadd(AppKeys(app.name).queues, b"default")
    key = queue_keys(app.name, "default").recent
    client.delete(key)
    for i in range(WRITTEN + more):
        client.xadd(key, {"e": pack_entry(f"t{i}", "work", "succeeded", 1_700_000_000_000 + i,
                                          1, 0.1, "w1"), "n": 5})
    client.xadd(key, {"e": pack_entry("planted", "work", "succeeded", 1_700_000_100_000, 1,
                                      0.1, "w1"), "n": planted_n})


@pytest.mark.parametrize("planted_n", [1, 2, "0", "-5", "1.5", "text", "nan"])
def test_a_planted_small_or_foreign_n_hides_no_outcome(app: Minitask, planted_n: Any) -> None:
    _record(app, planted_n)
    listing = recent(app)
    assert len(listing.tasks) == WRITTEN + 1, listing


@pytest.mark.parametrize("planted_n", ["1e300", "inf", "1000000"])
def test_a_planted_huge_n_lifts_no_cap_past_the_apps(app: Minitask, planted_n: Any) -> None:
    _record(app, planted_n, more=5)  # 9 entries: the app keeps 5
    listing = recent(app)
    assert len(listing.tasks) == 5, listing


def test_a_writers_larger_cap_moves_no_listing_either(app: Minitask) -> None:
    _record(app, 7, more=5)  # 9 entries, the newest saying 7: the app's own cap is 5
    assert len(recent(app).tasks) == 5
