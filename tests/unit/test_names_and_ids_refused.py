"""App, queue and task names and task ids that hold control, escape or glob characters,
or are no non-empty str, are refused wherever they are given; printable unicode is not."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitask import ConfigurationError, Minitask, Task
from minitask.broker import keys
from minitask.wire import message
from tests.support.snapshots import refused

pytestmark = pytest.mark.app("shop")


CONTROL = ["\x00", "\x0b", "\x0c", "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "\u200b",
           "\u202e", "\ufeff", "\ud800"]


@pytest.mark.parametrize("char", CONTROL + ["*", "?", "[", "]", "\\"], ids=repr)
def test_an_app_name_with_a_control_or_glob_character_is_refused(char: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Minitask(f"sh{char}op", broker="redis://127.0.0.1:1/0")
    assert repr(char)[1:-1] in str(caught.value)


def test_terminal_escape_sequences_are_refused_in_names() -> None:
    with pytest.raises(ConfigurationError, match="x1b"):
        Minitask("shop\x1b[2J\x1b[31m", broker="redis://127.0.0.1:1/0")


@pytest.mark.parametrize("char", CONTROL, ids=repr)
def test_a_queue_name_with_a_control_character_is_refused_everywhere(
        app: Minitask, add: Task[Any, Any], fake_redis: Any, char: str) -> None:
    queue = f"emails{char}"
    with pytest.raises(ConfigurationError):
        Minitask("shop", broker=fake_redis, default_queue=queue)
    with pytest.raises(ConfigurationError):
        app.task(queue=queue)(lambda: None)
    refused(fake_redis, ConfigurationError, lambda: add.apply_async((1, 2), queue=queue),
            repr(char)[1:-1])


def test_queue_names_may_hold_glob_characters(app: Minitask) -> None:
    assert app.task(queue="bulk*")(lambda: None).queue == "bulk*"


@pytest.mark.parametrize("char", CONTROL, ids=repr)
def test_a_task_name_with_a_control_character_is_refused(app: Minitask, char: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        app.task(name=f"shop.send{char}")(lambda: None)
    assert repr(char)[1:-1] in str(caught.value)
    assert app.tasks == {}


def test_a_default_task_name_with_a_control_character_asks_for_a_name(app: Minitask) -> None:
    def job() -> None:
        pass

    job.__module__ = "scripts.weird\nname"
    with pytest.raises(ConfigurationError, match="pass name="):
        app.task(job)
    assert app.task(name="scripts.job")(job).name == "scripts.job"


@pytest.mark.parametrize("name", [12, b"shop.send", "", ["a"]], ids=repr)
def test_a_task_name_that_is_not_a_non_empty_str_is_refused(app: Minitask, name: Any) -> None:
    with pytest.raises(ConfigurationError, match="name"):
        app.task(name=name)(lambda: None)


@pytest.mark.parametrize("task_id", [
    "order-1\n2030-01-01 00:00:00 INFO task x succeeded", "id\x1b[31mred", "a\u2028b",
    "a\x00b", "\u202eevil", "", 42, b"id"], ids=repr)
def test_a_task_id_that_could_forge_a_log_line_is_refused(
        add: Task[Any, Any], fake_redis: Any, task_id: Any) -> None:
    error = refused(fake_redis, ConfigurationError,
                    lambda: add.apply_async((1, 2), task_id=task_id), "'shop.add'", "task_id")
    assert repr(task_id)[1:-1] in str(error)


def test_printable_unicode_names_and_ids_are_accepted(app: Minitask) -> None:
    other = Minitask("boutique-\u00e9t\u00e9", broker=app.broker.client, clock=app.clock)

    @other.task(name="envoyer.\u00e9t\u00e9", queue="courriels-\u65e5\u672c")
    def send(x: int) -> int:
        return x

    handle = send.apply_async((1,), task_id="commande-\u00e9-42 \U0001f600")
    assert handle.status() == "queued"


def test_keys_and_message_refuse_the_same_unicode_categories() -> None:
    assert keys._UNPRINTABLE == message.UNPRINTABLE


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(min_size=1, max_size=6))
def test_every_name_that_message_calls_unprintable_is_refused_by_keys(text: str) -> None:
    if message.unprintable(text) is not None:
        with pytest.raises(ValueError):
            keys.check_name("queue", text)
