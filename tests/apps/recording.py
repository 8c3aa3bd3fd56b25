"""An app whose tasks end in a way that makes the app's own code raise a BaseException
while the worker records their outcome: a registered type's encode function raising on
the return value, and an exception whose text (``__str__``, or the ``__repr__`` of what
it carries) raises. The broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

from typing import Any

from minitask import Minitask

app = Minitask("recording")


class Mine(BaseException):
    """A BaseException of the app's own."""


class Interrupts:
    """Its encode function raises KeyboardInterrupt."""


class Exits:
    """Its encode function raises SystemExit."""


class Own:
    """Its encode function raises a BaseException of the app's own."""


def _raiser(error: BaseException) -> Any:
    def encode(value: Any) -> bytes:
        raise error
    return encode


def _never(data: bytes) -> Any:
    raise AssertionError("never decoded: never encoded")


app.register_type(Interrupts, 40, _raiser(KeyboardInterrupt("from an encode function")),
                  _never)
app.register_type(Exits, 41, _raiser(SystemExit(5)), _never)
app.register_type(Own, 42, _raiser(Mine("from an encode function")), _never)


class TextExits(Exception):
    """An exception whose text cannot be read: its __str__ raises SystemExit."""

    def __str__(self) -> str:
        raise SystemExit(6)


class TextInterrupts(Exception):
    """Its __str__ raises KeyboardInterrupt."""

    def __str__(self) -> str:
        raise KeyboardInterrupt("from __str__")


class TextFails(Exception):
    """Its __str__ raises an ordinary exception."""

    def __str__(self) -> str:
        raise ValueError("from __str__")


class Prying(Exception):
    """Formatting its traceback raises SystemExit: its __getattr__ (asked for
    ``__notes__``) raises it."""

    def __getattr__(self, name: str) -> Any:
        raise SystemExit(f"no {name}")


class Loud:
    """Carried by an exception: its __repr__ raises KeyboardInterrupt."""

    def __repr__(self) -> str:
        raise KeyboardInterrupt("from __repr__")


@app.task(retries=0, name="encode_interrupt")
def encode_interrupt() -> Any:
    return {"inside": [Interrupts()]}


@app.task(retries=0, name="encode_exit")
def encode_exit() -> Any:
    return Exits()


@app.task(retries=0, name="encode_own")
def encode_own() -> Any:
    return Own()


@app.task(retries=0, name="text_exits")
def text_exits() -> None:
    raise TextExits()


@app.task(retries=1, retry_backoff=0, name="text_interrupts")
def text_interrupts() -> None:
    raise TextInterrupts()


@app.task(retries=0, name="text_fails")
def text_fails() -> None:
    raise TextFails()


@app.task(retries=0, name="repr_interrupts")
def repr_interrupts() -> None:
    raise ValueError(Loud(), "and a second argument")


@app.task(retries=0, name="prying")
def prying() -> None:
    raise Prying("its traceback cannot be formatted")


@app.task(retries=0, name="async_text_exits")
async def async_text_exits() -> None:
    raise TextExits()


@app.task(name="double")
def double(x: int) -> int:
    return 2 * x
