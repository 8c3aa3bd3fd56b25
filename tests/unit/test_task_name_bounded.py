"""A task name is bounded as an id is: a message naming one over ``MAX_NAME_BYTES``
is refused at decode (dead-lettered, never run), saying so in a few hundred
characters, and ``@app.task`` refuses such a name, so that no registered task is
ever refused (probe 16: a planted 2 MB name was logged, recorded and printed whole)."""
from __future__ import annotations

import pytest

from minitask import ConfigurationError, Minitask
from minitask.errors import DecodeError
from minitask.wire.message import MAX_NAME_BYTES
from minitask.wire.serializer import decode_message
from tests.support.envelopes import body


@pytest.mark.parametrize("name", ["n" * (MAX_NAME_BYTES + 1), "é" * (MAX_NAME_BYTES // 2 + 1),
                                  "n" * 2_000_000], ids=["ascii", "utf8", "2MB"])
def test_a_message_naming_a_task_longer_than_any_is_refused(name: str) -> None:
    with pytest.raises(DecodeError) as refused:
        decode_message(body(task=name))
    assert "field 'task'" in str(refused.value)
    assert f"over the {MAX_NAME_BYTES} a task name may hold" in str(refused.value)
    assert len(str(refused.value)) < 1000


def test_a_task_name_of_max_name_bytes_is_registered_and_decoded() -> None:
    app = Minitask("names", broker="redis://127.0.0.1:1/0")
    name = "n" * MAX_NAME_BYTES
    app.task(name=name)(lambda: None)
    assert decode_message(body(task=name)).task == name
    with pytest.raises(ConfigurationError, match=f"its name is over {MAX_NAME_BYTES} bytes"):
        app.task(name=name + "n")(lambda: None)
