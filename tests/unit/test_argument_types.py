"""UUID and Decimal as built-in extension types, and the types an app registers:
their bytes, their round trip through a worker, and every refusal."""
from __future__ import annotations

import asyncio
import dataclasses
import decimal
import enum
import uuid
from typing import Any, List

import fakeredis
import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from minitask import (ConfigurationError, DecodeError, EncodeError, Minitask, TaskFailed, chain,
                      chord)
from minitask.wire.message import Message, Outcome
from minitask.wire.serializer import (check_arguments, decode_message, decode_outcome,
                                      encode_message, encode_outcome)
from tests.support.clock import ManualClock
from tests.support.draining import drain


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Money:
    amount: decimal.Decimal
    currency: str


class Euros(Money):
    pass


def _money(value: Money) -> bytes:
    return f"{value.amount} {value.currency}".encode()


def _unmoney(data: bytes) -> Money:
    amount, currency = data.decode().split()
    return Money(decimal.Decimal(amount), currency)


def _register(app: Minitask) -> None:
    app.register_type(Color, 40, lambda c: c.value.encode(), lambda b: Color(b.decode()))
    app.register_type(Level, 41, lambda v: bytes([v.value]), lambda b: Level(b[0]))
    app.register_type(Money, 42, _money, _unmoney)


def _message(args: List[Any]) -> Message:
    return Message(id="id1", task="t", args=args, kwargs={}, queue="default", priority=5,
                   enqueued_at_ms=0, eta_ms=None)


# -- the built-in types: their bytes and their round trip ---------------------------------

def test_uuid_and_decimal_bytes_are_the_documented_extensions() -> None:
    value = uuid.UUID("12345678-1234-5678-1234-567812345678")
    body = encode_message(_message([value, decimal.Decimal("-1.50")]))
    # fixext 16 (0xd8), code 1, the 16 bytes most significant first
    assert b"\xd8\x01" + value.bytes in body
    # fixext 4... sizes vary: ext 8 (0xc7), length 5, code 2, the text in ASCII
    assert b"\xc7\x05\x02-1.50" in body


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.uuids(), st.decimals(allow_nan=True, allow_infinity=True)),
                max_size=5))
def test_uuid_and_decimal_round_trip_in_messages_and_outcomes(values: List[Any]) -> None:
    check_arguments("t", values, {})
    back = decode_message(encode_message(_message(values))).args
    assert [type(v) for v in back] == [type(v) for v in values]
    assert [str(v) for v in back] == [str(v) for v in values]  # sign, exponent, NaN kinds
    outcome = decode_outcome(encode_outcome(Outcome("succeeded", 0, value=values)))
    assert [str(v) for v in outcome.value] == [str(v) for v in values]


def test_a_malformed_builtin_extension_is_a_decode_error_naming_its_field() -> None:
    raw = msgpack.packb({"v": 1, "id": "x", "task": "t", "queue": "q", "args": [
        msgpack.ExtType(1, b"short")], "kwargs": {}, "priority": 0, "enqueued_at_ms": 0,
        "eta_ms": None, "attempt": 1}, use_bin_type=True)
    with pytest.raises(DecodeError, match=r"field 'args'.*code 1 \(UUID\) holding 5 bytes"):
        decode_message(raw)


# -- registered types through a worker ---------------------------------------------------

@pytest.fixture
def typed(app: Minitask) -> Minitask:
    _register(app)
    return app


def test_registered_types_round_trip_through_a_worker(typed: Minitask) -> None:
    seen: List[Any] = []

    @typed.task
    def echo(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return [args, kwargs]

    nested = {"by": {Color.RED: [Money(decimal.Decimal("9.99"), "EUR")]}}
    handle = echo.delay(Color.BLUE, Level.HIGH, uuid.UUID(int=7), nested,
                        when=decimal.Decimal("0.1"))
    drain(typed.worker(burst=True))
    (args, kwargs), = seen
    assert args == (Color.BLUE, Level.HIGH, uuid.UUID(int=7), nested)
    assert type(args[1]) is Level and kwargs == {"when": decimal.Decimal("0.1")}
    assert handle.get(timeout=1) == [list(args), kwargs]


def test_a_registered_value_goes_on_through_a_chain_and_a_chord(typed: Minitask) -> None:
    @typed.task
    def pay(amount: str) -> Money:
        return Money(decimal.Decimal(amount), "EUR")

    @typed.task
    def double(money: Money) -> Money:
        return Money(money.amount * 2, money.currency)

    @typed.task
    def total(values: List[Money]) -> Money:
        return Money(sum((v.amount for v in values), decimal.Decimal(0)), "EUR")

    last = chain(pay.s("1.25"), double.s()).delay()
    body = chord([pay.s("1"), pay.s("2.50")], total.s()).delay()
    drain(typed.worker(burst=True))
    assert last.get(timeout=1) == Money(decimal.Decimal("2.50"), "EUR")
    assert body.get(timeout=1) == Money(decimal.Decimal("3.50"), "EUR")


def test_the_async_producer_and_handle_carry_registered_types(clock: ManualClock) -> None:
    server = fakeredis.FakeServer()
    app = Minitask("test", broker=fakeredis.FakeRedis(server=server),
                   async_broker=fakeredis.FakeAsyncRedis(server=server), clock=clock)
    _register(app)

    @app.task
    def same(value: Any) -> Any:
        return value

    async def send() -> Any:
        return await same.adelay(Color.RED)

    handle = asyncio.run(send())
    drain(app.worker(burst=True))

    async def read() -> Any:
        return await handle.aget(timeout=1)

    assert asyncio.run(read()) is Color.RED


def test_an_exact_class_wins_then_the_first_registered_base(app: Minitask) -> None:
    app.register_type(Money, 42, _money, _unmoney)
    seen: List[Any] = []

    @app.task
    def keep(value: Any) -> None:
        seen.append(value)

    keep.delay(Euros(decimal.Decimal(1), "EUR"))  # a subclass travels as Money
    app.register_type(Euros, 43, lambda e: str(e.amount).encode(),
                      lambda b: Euros(decimal.Decimal(b.decode()), "EUR"))
    keep.delay(Euros(decimal.Decimal(2), "EUR"))  # now its own class's
    drain(app.worker(burst=True))
    assert [type(value) for value in seen] == [Money, Euros]


# -- refusals ---------------------------------------------------------------------------

@pytest.mark.parametrize("code,words", [
    (31, "from 32 to 127"), (128, "from 32 to 127"), (-1, "from 32 to 127"),
    (True, "from 32 to 127"), ("40", "from 32 to 127"), (40, "taken by Color"),
])
def test_a_code_outside_the_range_or_taken_is_refused(typed: Minitask, code: Any,
                                                      words: str) -> None:
    class Other:
        pass

    with pytest.raises(ConfigurationError, match=words):
        typed.register_type(Other, code, repr, repr)


@pytest.mark.parametrize("cls", [uuid.UUID, decimal.Decimal, int, str, dict, type(None)])
def test_a_type_minitask_carries_itself_is_refused(app: Minitask, cls: type) -> None:
    with pytest.raises(ConfigurationError, match="carried by minitask itself"):
        app.register_type(cls, 50, repr, repr)


def test_a_class_registered_twice_or_not_a_class_or_no_callables_is_refused(
        typed: Minitask) -> None:
    with pytest.raises(ConfigurationError, match="registered already, with code 40"):
        typed.register_type(Color, 60, repr, repr)
    with pytest.raises(ConfigurationError, match="must be a class"):
        typed.register_type(Color.RED, 61, repr, repr)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="callables"):
        typed.register_type(Money.__mro__[1], 62, "x", repr)  # type: ignore[arg-type]


def test_an_encode_function_that_fails_names_the_task_and_path_and_sends_nothing(
        app: Minitask) -> None:
    app.register_type(Color, 40, lambda c: 1 / 0, lambda b: Color(b.decode()))
    app.register_type(Level, 41, lambda v: "not bytes", lambda b: Level(b[0]))

    @app.task
    def take(*args: Any, **kwargs: Any) -> None:
        pass

    with pytest.raises(EncodeError, match=r"task '[\w.<>]+take': cannot send .* at "
                                          r"kwargs\['x'\]\[0\]: .*ZeroDivisionError") as caught:
        take.delay(x=[Color.RED])
    assert caught.value.path == "kwargs['x'][0]" and caught.value.task_name == take.name
    with pytest.raises(EncodeError, match=r"at args\[0\]: .*returned str, not bytes"):
        take.delay(Level.LOW)
    assert app.broker.client.keys("*messages*") == []  # nothing was sent


def test_an_unregistered_code_dead_letters_the_task_naming_the_code_never_retried(
        clock: ManualClock) -> None:
    server = fakeredis.FakeServer()
    producer = Minitask("test", broker=fakeredis.FakeRedis(server=server), clock=clock)
    worker_app = Minitask("test", broker=fakeredis.FakeRedis(server=server), clock=clock)
    _register(producer)
    ran: List[Any] = []
    for app in (producer, worker_app):
        @app.task(name="take", retries=3)
        def take(value: Any) -> None:
            ran.append(value)

    handle = producer.tasks["take"].delay(Color.RED)
    drain(worker_app.worker(burst=True))
    assert ran == [] and handle.status() == "failed"
    with pytest.raises(TaskFailed, match="extension type code 40 is not registered") as caught:
        handle.get(timeout=1)
    assert caught.value.exc_type == "DecodeError"
    assert "args[0]" in str(caught.value)


def test_a_result_of_an_unregistered_code_is_a_decode_error_naming_it(
        clock: ManualClock) -> None:
    server = fakeredis.FakeServer()
    worker_app = Minitask("test", broker=fakeredis.FakeRedis(server=server), clock=clock)
    reader = Minitask("test", broker=fakeredis.FakeRedis(server=server), clock=clock)
    _register(worker_app)

    @worker_app.task(name="make")
    def make() -> Color:
        return Color.BLUE

    handle = make.delay()
    drain(worker_app.worker(burst=True))
    with pytest.raises(DecodeError, match="the return value: extension type code 40 is not "
                                          "registered"):
        reader.handle(handle.id).get(timeout=1)


def test_a_decode_function_that_fails_dead_letters_the_task(app: Minitask) -> None:
    app.register_type(Color, 40, lambda c: c.value.encode(), lambda b: 1 / 0)

    @app.task(retries=3)
    def take(value: Any) -> None:
        pass

    handle = take.delay(Color.RED)
    drain(app.worker(burst=True))
    with pytest.raises(TaskFailed, match=r"args\[0\]: the decode function registered for "
                                         r"Color \(code 40\) raised ZeroDivisionError"):
        handle.get(timeout=1)


@pytest.mark.parametrize("register", [False, True], ids=["plain app", "typed app"])
def test_a_value_as_deep_as_allowed_goes_through_with_or_without_types(
        app: Minitask, register: bool) -> None:
    if register:
        _register(app)

    @app.task
    def same(value: Any) -> Any:
        return value

    deep: List[Any] = [Color.RED if register else "red"]
    for _ in range(500):
        deep = [deep, uuid.UUID(int=1)]
    handle = same.delay(deep)
    drain(app.worker(burst=True))
    assert handle.get(timeout=1) == deep


def test_a_value_that_holds_itself_is_refused_with_its_path_when_types_are_registered(
        typed: Minitask) -> None:
    @typed.task
    def same(value: Any) -> Any:
        return value

    looped: List[Any] = [Color.RED]
    looped.append(looped)
    with pytest.raises(EncodeError, match=r"args\[0\]\[1\]\[1\].*nested more than"):
        same.delay(looped)


def test_a_periodic_schedule_and_an_added_one_carry_registered_types(
        typed: Minitask, clock: ManualClock) -> None:
    seen: List[Any] = []

    red_price = Money(decimal.Decimal(1), "EUR")

    @typed.periodic(every=60, args=(Color.RED,), kwargs={"price": red_price})
    def tick(color: Color, price: Money) -> None:
        seen.append((color, price))

    typed.add_schedule("blue", tick, every=60, args=(Color.BLUE,),
                       kwargs={"price": Money(decimal.Decimal(2), "EUR")})
    worker = typed.worker(burst=True)
    worker.starting()  # what run() does first: writes the decorated schedules
    drain(worker)
    clock.advance(61)
    drain(worker)
    assert sorted(seen, key=lambda pair: pair[0].value) == [
        (Color.BLUE, Money(decimal.Decimal(2), "EUR")),
        (Color.RED, Money(decimal.Decimal(1), "EUR"))]
