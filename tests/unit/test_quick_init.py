"""quick_init: a frozen dataclass built by the worker for every task gets a cheaper
``__init__`` that builds the very same object as the generated one."""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Dict, List, Tuple, Type

import pytest

from minitask.context import TaskContext
from minitask.stores.queue import Delivery, FetchResult, FetchTerms
from minitask.wire.message import Message, Outcome, quick_init
from minitask.worker.leases import Job


def copy(item: "dataclasses.Field[Any]") -> Any:
    """A field like ``item``, for a dataclass built anew with the generated __init__."""
    return dataclasses.field(default=item.default, default_factory=item.default_factory,
                             repr=item.repr, compare=item.compare)


DELIVERY = Delivery("t1", b"body", 1, 5)
CASES: List[Tuple[Any, ...]] = [
    (Delivery, ("t1", b"x", 2, 5), {}),
    (Delivery, ("t1", b"x", 2, 5), {"flow": False}),
    (FetchResult, ([DELIVERY], ["p"], None), {}),
    (FetchResult, ([], [], 12), {"expired": [("e", 3)]}),
    (FetchTerms, (30_000, 1, 5), {}),
    (Job, ("default", DELIVERY), {}),
    (Message, ("id", "task", [1], {"a": 2}, "q", 0, 1), {"eta_ms": 5, "attempt": 3}),
    (Message, (), {"id": "id", "task": "t", "args": [], "kwargs": {}, "queue": "q",
                   "priority": 9, "enqueued_at_ms": 7, "flow": "f", "trace": {"a": "b"}}),
    (Outcome, ("succeeded", 10), {"value": 3, "attempt": 1}),
    (Outcome, ("failed", 10, None, "E", "m", "tb", "r", 2, {"k": 1}), {}),
    (TaskContext, ("id", "t", "q", 0, 1, None, None), {"delivery": 2}),
]


@pytest.mark.parametrize("cls, args, kwargs", CASES)
def test_builds_what_the_generated_init_builds(cls: Type[Any], args: Tuple[Any, ...],
                                               kwargs: Dict[str, Any]) -> None:
    reference = dataclasses.make_dataclass(
        cls.__name__, [(f.name, f.type, copy(f)) for f in dataclasses.fields(cls)],
        frozen=True)
    quick, plain = cls(*args, **kwargs), reference(*args, **kwargs)
    assert vars(quick) == vars(plain)
    assert list(vars(quick)) == list(vars(plain))  # the fields' order too
    assert quick == cls(*args, **kwargs)
    if all(not isinstance(value, (list, dict)) for value in vars(quick).values()):
        assert hash(quick) == hash(cls(*args, **kwargs))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(quick, dataclasses.fields(cls)[0].name, None)
    assert dataclasses.replace(quick) == quick


def test_default_factories_make_a_new_value_each_time() -> None:
    first, second = Outcome("succeeded", 1), Outcome("succeeded", 1)
    assert first.extra == {} and first.extra is not second.extra
    result = FetchResult([], [], None)
    assert result.expired == [] and result.expired is not FetchResult([], [], None).expired


def test_wrong_arguments_are_refused_as_by_the_generated_init() -> None:
    with pytest.raises(TypeError, match="missing 3 required positional arguments"):
        Delivery("t1")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        Delivery("t1", b"", 1, 5, bogus=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'task_id'"):
        Delivery("t1", b"", 1, 5, task_id="t2")  # type: ignore[misc]


def test_signature_keeps_names_defaults_and_types() -> None:
    parameters = inspect.signature(Outcome).parameters
    assert list(parameters) == [f.name for f in dataclasses.fields(Outcome)]
    assert parameters["attempt"].default == 0
    assert repr(parameters["extra"].default) == "<factory>"
    assert parameters["status"].annotation == "str"


def test_refuses_what_it_would_build_wrong() -> None:
    @dataclasses.dataclass
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True)
    class Posted:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class KeywordOnly:
        a: int = dataclasses.field(kw_only=True)

    @dataclasses.dataclass(frozen=True)
    class NotInit:
        a: int = dataclasses.field(default=1, init=False)

    for cls in (Mutable, Posted, KeywordOnly, NotInit):
        with pytest.raises(TypeError, match=cls.__name__):
            quick_init(cls)
