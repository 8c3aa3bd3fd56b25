"""Times and numbers a call, a decorator or an app refuses: not finite, out of range, of
the wrong type; the error names the task (or app) and the value, and Redis is unchanged."""
from __future__ import annotations

import datetime as dt
import math
from typing import Any, Dict

import pytest

from minitask import ConfigurationError, Minitask, Task
from minitask.wire.message import MAX_RETRIES
from tests.support.draining import drain
from tests.support.snapshots import refused

UTC = dt.timezone.utc
NAN, INF = math.nan, math.inf

pytestmark = pytest.mark.app("shop")


@pytest.mark.parametrize("seconds", [NAN, INF, -INF, 1e300, 1e308, "5", None, True, [5]],
                         ids=repr)
def test_apply_in_refuses_a_time_that_is_not_a_finite_number_of_seconds_ahead(
        add: Task[Any, Any], fake_redis: Any, seconds: Any) -> None:
    error = refused(fake_redis, ConfigurationError, lambda: add.apply_in(seconds, 1, 2),
                    "'shop.add'", "apply_in", repr(seconds))
    assert isinstance(error, ValueError)


@pytest.mark.parametrize("when", [NAN, INF, -INF, 1e300, "1800000000", None, False,
                                  dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                                  dt.datetime(9999, 12, 31, 20, tzinfo=dt.timezone(
                                      dt.timedelta(hours=-8)))], ids=repr)
def test_apply_at_refuses_a_time_that_is_not_a_finite_timestamp_before_year_10000(
        add: Task[Any, Any], fake_redis: Any, when: Any) -> None:
    refused(fake_redis, ConfigurationError, lambda: add.apply_at(when, 1, 2), "'shop.add'", "eta")


@pytest.mark.parametrize("options", [
    {"delay": NAN}, {"delay": INF}, {"delay": "5"}, {"delay": 1e300},
    {"eta": NAN}, {"eta": -INF}, {"eta": 1e20},
], ids=repr)
def test_apply_async_refuses_a_delay_or_eta_that_is_not_a_finite_time(
        add: Task[Any, Any], fake_redis: Any, options: Dict[str, Any]) -> None:
    refused(fake_redis, ConfigurationError, lambda: add.apply_async((1, 2), **options),
            "'shop.add'")


def test_the_farthest_times_that_fit_are_accepted(app: Minitask, add: Task[Any, Any],
                                                  clock: Any) -> None:
    century = add.apply_in(100 * 365 * 86400.0, 1, 2)
    last = add.apply_at(dt.datetime(9999, 12, 31, 23, 59, 59, 998000, tzinfo=UTC), 1, 2)
    past = add.apply_at(-1e300, 1, 2)  # long ago: at once
    assert century.status() == last.status() == "scheduled"
    assert past.status() == "queued"


@pytest.mark.parametrize("options", [
    {"timeout": NAN}, {"timeout": INF}, {"timeout": -INF}, {"timeout": 1e300},
    {"timeout": "60"}, {"timeout": True},
    {"result_ttl": NAN}, {"result_ttl": INF}, {"result_ttl": 1e300},
    {"retry_backoff": NAN}, {"retry_backoff_max": INF}, {"retry_backoff": -1.0},
    {"retries": True}, {"retries": MAX_RETRIES + 1}, {"retries": 10 ** 30},
    {"ignore_result": "no"},
], ids=repr)
def test_decorator_refuses_non_finite_or_wrong_typed_numbers_naming_task_and_value(
        app: Minitask, options: Dict[str, Any]) -> None:
    def job() -> None:
        pass

    with pytest.raises(ConfigurationError) as caught:
        app.task(name="shop.job", **options)(job)
    [(option, value)] = options.items()
    assert "'shop.job'" in str(caught.value) and option in str(caught.value)
    assert repr(value) in str(caught.value)
    assert app.tasks == {}


def test_the_largest_accepted_options_still_run(app: Minitask) -> None:
    @app.task(timeout=3_155_760_000, result_ttl=3_155_760_000, retries=MAX_RETRIES,
              retry_backoff_max=3_155_760_000)
    def job() -> int:
        return 1

    handle = job.delay()
    assert drain(app.worker()) == 1
    assert handle.get(timeout=1) == 1


@pytest.mark.parametrize("options,option", [
    ({"result_ttl": NAN}, "result_ttl"), ({"result_ttl": math.inf}, "result_ttl"),
    ({"visibility_timeout": NAN}, "visibility_timeout"),
    ({"visibility_timeout": math.inf}, "visibility_timeout"),
    ({"visibility_timeout": 1e300}, "visibility_timeout"),
    ({"visibility_timeout": True}, "visibility_timeout"),
    ({"max_deliveries": True}, "max_deliveries"), ({"max_deliveries": 10 ** 30}, "max_deliveries"),
    ({"max_message_bytes": "x"}, "max_message_bytes"),
    ({"max_message_bytes": NAN}, "max_message_bytes"),
    ({"max_message_bytes": -1}, "max_message_bytes"),
])
def test_app_options_out_of_range_or_of_the_wrong_type_are_refused_at_once(
        fake_redis: Any, options: Dict[str, Any], option: str) -> None:
    with pytest.raises(ConfigurationError, match=option):
        Minitask("shop", broker=fake_redis, **options)
    assert fake_redis.dbsize() == 0
