"""Apps on one Redis never see each other's tasks; a task id names one task, whatever
its queue.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``);
time moves only through the ManualClock.
"""
from __future__ import annotations

from typing import Any, Callable, List


from minitask import Minitask, current_task
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain
from tests.support.outcomes import ready


def test_two_apps_on_one_redis_never_see_each_others_tasks(
        make_app: Callable[..., Minitask], redis_client: Any) -> None:
    shop, blog = make_app("shop"), make_app("blog")
    ran: List[str] = []

    @shop.task(name="common.job")
    def shop_job() -> str:
        ran.append("shop")
        return "shop"

    @blog.task(name="common.job")
    def blog_job() -> str:
        ran.append("blog")
        return "blog"

    shop_handle, blog_handle = shop_job.delay(), blog_job.delay()
    assert drain(shop.worker()) == 1
    assert ran == ["shop"]
    assert blog_handle.status() == "queued"
    assert shop.handle(blog_handle.id).status() == "unknown"
    assert blog.handle(shop_handle.id).status() == "unknown"
    assert drain(blog.worker()) == 1
    assert ran == ["shop", "blog"]
    assert blog_handle.get(timeout=1) == "blog"
    assert shop_handle.get(timeout=1) == "shop"
    for key in redis_client.keys("*"):
        assert key.startswith((b"minitask:{shop", b"minitask:{blog")), key


def test_apps_whose_names_share_a_prefix_are_isolated(make_app: Callable[..., Minitask]) -> None:
    one, other = make_app("shop"), make_app("shop2")
    ran: List[str] = []

    @one.task(name="job")
    def first() -> None:
        ran.append("shop")

    @other.task(name="job")
    def second() -> None:
        ran.append("shop2")

    first.delay()
    second.delay()
    drain(other.worker())
    assert ran == ["shop2"]
    drain(one.worker())
    assert ran == ["shop2", "shop"]


def test_reenqueueing_a_pending_task_id_does_not_duplicate_it(
        make_app: Callable[..., Minitask], redis_client: Any, clock: Any) -> None:
    app = make_app()
    ran: List[str] = []

    @app.task
    def job(label: str) -> str:
        ran.append(label)
        context = current_task()
        assert context is not None
        job.apply_async(("while-running",), task_id=context.id)
        return label

    first = job.apply_async(("first",), task_id="order-7")
    second = job.apply_async(("second",), task_id="order-7")
    assert second.id == first.id == "order-7"
    keys = QueueKeys(app.name, "default")
    assert ready(app) == 1
    scheduled = job.apply_async(("s1",), task_id="later-1", delay=5)
    job.apply_async(("s2",), task_id="later-1", delay=5)
    job.apply_async(("s3",), task_id="later-1")  # even as "now"
    assert redis_client.zcard(keys.delayed) == 1 and ready(app) == 1
    clock.advance(5)
    drain(app.worker())
    assert ran == ["first", "s1"]
    assert first.get(timeout=1) == "first"
    assert scheduled.get(timeout=1) == "s1"


def test_handle_by_id_finds_a_task_sent_to_a_per_call_queue(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def job(n: int) -> int:
        return n * 2

    sent = job.apply_async((21,), queue="special")
    found = app.handle(sent.id)
    assert found.status() == "queued"
    fresh_app = make_app()  # another process, say: knows nothing but the id
    assert fresh_app.handle(sent.id).status() == "queued"
    drain(app.worker(queues=["special"]))
    assert found.status() == "succeeded"
    assert fresh_app.handle(sent.id).get(timeout=1) == 42
    assert app.handle(sent.id).get(timeout=1) == 42
