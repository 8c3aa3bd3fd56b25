"""Plan records read as the packer writes them (issue 29, probe 8): an error callback
that is a group or a chain, a queue name no queue may have, a task name longer than
any minitask keeps, a record that is not msgpack: each a damaged record said plainly
(naming its key) by the reader, the page, the API and ``minitask inspect workflow``,
never an exception; what a view reads is bounded by the packer's budgets whatever the
record holds; the headline says the workflow's true size; ``inspect`` refuses an id
no task can have in one line."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis
from hypothesis import HealthCheck, given, settings, strategies as st

from minitask import Minitask, chain, chord
from minitask.admin.workflows import workflow
from minitask.broker.keys import MAX_NAME
from minitask.cli.main import main
from minitask.dashboard.web import Dashboard
from minitask.errors import DecodeError
from minitask.stores.plans import TASKS_SHOWN, tree
from minitask.wire.serializer import pack_data
from tests.unit.test_dashboard import call

TASK = ["t", "e1", 0, 0, [[], 0]]


def _app(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Any]:
    app = make_app("shop")

    @app.task(name="shop.add")
    def add(a: int, b: int) -> int:
        return a + b

    return app, add


def _plant(app: Minitask, client: "redis.Redis[bytes]", wid: str, root: Any,
           names: Any = ("shop.add",), queues: Any = ("default",)) -> str:
    key = app.broker.workflows.keys("default").workflow(wid)
    client.set(key, pack_data({"v": 2, "id": wid, "at": 1, "n": list(names),
                               "q": list(queues), "l": [0] * len(names), "root": root},
                              "a plan"))
    return key


def _watch_lookups(app: Minitask, monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    """The (queue, task id) pairs each state lookup of ``app`` is asked for."""
    looked: List[Any] = []
    states = app.broker.results.states

    def watched(pairs: Any) -> Any:
        looked.append(list(pairs))
        return states(pairs)

    monkeypatch.setattr(app.broker.results, "states", watched)
    return looked


def _cli(app: Minitask, monkeypatch: pytest.MonkeyPatch, *words: str) -> int:
    monkeypatch.setattr("minitask.cli.inspect.load", lambda _app: app)
    return main(["inspect", "-A", "shop", *words])


def _said_plainly(app: Minitask, wid: str, key: str, says: str,
                  monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The reader, the page, the API and the CLI each say the record is damaged."""
    with pytest.raises(DecodeError, match=says) as raised:
        workflow(app, wid)
    assert key in str(raised.value)
    dashboard = Dashboard(app)
    status, _, body = call(dashboard, f"/workflow/{wid}")
    assert status == "200 OK" and 'id="unreadable"' in body and key in body
    status, _, body = call(dashboard, f"/api/workflow/{wid}")
    assert status == "200 OK" and key in body and '"found": false' in body
    capsys.readouterr()
    assert _cli(app, monkeypatch, "workflow", wid) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and key in err, err


@pytest.mark.parametrize("errback", [
    ["g", "gid1", [TASK], 0, [[], 0]],            # a group
    ["c", [TASK], 0, [[], 0]],                    # a chain
    ["h", "h1", [TASK], 0, TASK, [[], 0]],        # a chord
    ["t", "e2", 0, 0, [[TASK], 0]],               # a task with error callbacks of its own
])
def test_an_error_callback_that_is_no_plain_task_is_a_damaged_record(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        errback: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    app, _ = _app(make_app)
    key = _plant(app, redis_client, "wfx", ["c", [TASK], 0, [[errback], 0]])
    _said_plainly(app, "wfx", key, "an error callback is a", monkeypatch, capsys)


@pytest.mark.parametrize("queues, names, says", [
    (["q" * 200_000], ["shop.add"], "queue table holds no queue"),
    (["a{b}"], ["shop.add"], "queue table holds no queue"),
    (["a:b"], ["shop.add"], "queue table holds no queue"),
    ([""], ["shop.add"], "queue table holds no queue"),
    (["default"], ["n" * (MAX_NAME + 1)], "characters long"),
    (["default"], ["a\x1b[31m"], "task name"),
    (["default"], [""], "is empty"),
])
def test_name_tables_are_read_by_the_naming_rules(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        queues: List[str], names: List[str], says: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    app, _ = _app(make_app)
    looked = _watch_lookups(app, monkeypatch)
    # the probe's record: 500 tasks (10 groups of 50) each in the one bad queue
    root = ["c", [["g", f"g{j}", [["t", f"id{j}-{i}", 0, 0, [[], 0]] for i in range(50)],
                   0, [[], 0]] for j in range(10)], 0, [[], 0]]
    key = _plant(app, redis_client, "amp", root, names, queues)
    _said_plainly(app, "amp", key, says, monkeypatch, capsys)
    assert looked == []  # refused before any step's state is looked up


def test_a_long_task_name_is_kept_cut_so_that_its_plan_reads(
        make_app: Callable[..., Minitask]) -> None:
    app, add = _app(make_app)
    long = app.task(name="shop." + "x" * 400)(lambda a, b: a - b)
    handle = chain(add.s(1, 2), long.s(1)).delay()
    found = workflow(app, handle.id) or pytest.fail("no plan")
    names = [step["task"] for step in found["root"]["steps"]]
    assert names[0] == "shop.add" and len(names[1]) == MAX_NAME
    assert names[1].startswith("shop.xxx") and names[1].endswith("\u2026")


def test_an_undecodable_record_is_said_unreadable_not_unknown(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    app, _ = _app(make_app)
    key = app.broker.workflows.keys("default").workflow("wf3")
    # a msgpack str holding bytes that are no UTF-8 (a lone surrogate, encoded)
    redis_client.set(key, b"\x81\xa2id\xa3\xed\xb2\x80")
    _said_plainly(app, "wf3", key, "unreadable", monkeypatch, capsys)
    redis_client.delete(key)
    redis_client.rpush(key, b"x")  # another type than a string
    _said_plainly(app, "wf3", key, "another type", monkeypatch, capsys)


def test_the_headline_says_the_true_size_of_a_workflow_the_plan_cut(
        make_app: Callable[..., Minitask], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    app, add = _app(make_app)
    tsum = app.task(name="shop.tsum")(lambda values: sum(values))
    handle = chord([add.s(i, i) for i in range(120)], tsum.s()).delay()
    found = workflow(app, handle.id) or pytest.fail("no plan")
    assert (found["tasks"], found["left_out"], found["steps"]) == (51, 70, 121)
    said = "a chord of 121 task(s), 51 kept in its plan, 70 left out"
    capsys.readouterr()
    assert _cli(app, monkeypatch, "workflow", handle.id) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert said in first and "(of those kept: 1 pending, 50 queued)" in first, first
    _, _, body = call(Dashboard(app), f"/workflow/{handle.id}")
    assert "A" + said[1:] in body
    # a record that does not say (an older minitask's) says what it knows
    key = app.broker.workflows.keys("default").workflow(handle.id)
    record = dict(app.broker.workflows.plan(handle.id, ["default"])[1])  # type: ignore[index]
    del record["s"]
    app.broker.workflows.transport.client.set(key, pack_data(record, "a plan"))
    capsys.readouterr()
    assert _cli(app, monkeypatch, "workflow", handle.id) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "a chord: 51 task(s) kept in its plan, 70 more step(s) left out" in first, first


@pytest.mark.parametrize("words, says", [
    (["\udcff\udcfe"], "task id '\\udcff\\udcfe' holds '\\udcff'"),
    (["--id", "a\udcffb"], "task id 'a\\udcffb' holds '\\udcff'"),
    (["workflow", "\udcff\udcfe"], "workflow id '\\udcff\\udcfe' holds '\\udcff'"),
    (["workflow", "a\x1bb"], "workflow id 'a\\x1bb' holds '\\x1b'"),
    (["workflow", " "], "workflow id ' ' is blank"),
    (["workflow", "\t\n"], "is blank"),
    (["  "], "task id '  ' is blank"),
])
def test_inspect_refuses_an_id_no_task_can_have_in_one_line(
        words: List[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "-A", "nosuch.app", *words]) == 2  # before the app loads
    err = capsys.readouterr().err
    assert says in err and len(err.splitlines()) == 1, err


# -- any record: the reader, the page, the API and the CLI never raise ---------------

_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.integers(-2 ** 63, 2 ** 64 - 1),
                  st.floats(allow_nan=True), st.text(max_size=4), st.binary(max_size=4),
                  st.dictionaries(st.text(max_size=2), st.integers(-9, 9), max_size=2))
_COUNT = st.one_of(st.integers(0, 3), st.sampled_from([-1, 10 ** 9 + 1, 2 ** 64 - 1]), _JUNK)
_ID = st.one_of(st.text(max_size=6), st.sampled_from(["\x1b[31m", "<b>", "\u202e", "a/b"]),
                _JUNK)


def _node(kids: Any) -> Any:
    items = st.lists(kids, max_size=3)
    errs = st.one_of(st.tuples(items, _COUNT).map(list), _JUNK)
    return st.one_of(
        st.tuples(st.just("c"), items, _COUNT, errs).map(list),
        st.tuples(st.just("g"), _ID, items, _COUNT, errs).map(list),
        st.tuples(st.just("h"), _ID, items, _COUNT, kids, errs).map(list),
        st.tuples(st.just("c"), items, _COUNT).map(list),  # version 1 shapes
        st.tuples(st.just("g"), _ID, items, _COUNT).map(list),
        st.lists(st.one_of(kids, _JUNK), max_size=4))


_TASK = st.one_of(
    st.tuples(st.just("t"), _ID, st.integers(-1, 2), st.integers(-1, 2),
              st.one_of(st.just([[], 0]), _JUNK)).map(list),
    st.tuples(st.just("t"), _ID, st.integers(-1, 2), st.integers(-1, 2)).map(list), _JUNK)
_NAME = st.one_of(st.sampled_from(["shop.add", "default", "q" * 400, "a:b", "x y", ""]),
                  st.text(max_size=6))
_RECORD = st.fixed_dictionaries({
    "v": st.sampled_from([1, 2, 2, 3, None, "2"]),
    "id": _ID, "at": st.one_of(st.integers(-5, 2 ** 62), _JUNK),
    "n": st.one_of(st.lists(_NAME, max_size=3), _JUNK),
    "q": st.one_of(st.lists(_NAME, max_size=3), _JUNK),
    "l": st.one_of(st.lists(_COUNT, max_size=3), _JUNK),
    "s": st.one_of(st.integers(-1, 10 ** 10), _JUNK),
    "root": st.recursive(_TASK, _node, max_leaves=20)})


@settings(max_examples=100, deadline=None)  # pure CPU (300 once ran past
# the 120 s test timeout on a heavily loaded machine, and its xdist worker hung)
@given(record=_RECORD)
def test_the_reader_reads_any_record_or_refuses_it(record: Dict[str, Any]) -> None:
    try:
        found = tree(record)
    except DecodeError:
        return
    assert found["kind"] in ("task", "chain", "group", "chord")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=_RECORD)
def test_no_record_makes_the_page_the_api_or_the_cli_raise(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        record: Dict[str, Any]) -> None:
    app = make_app("shop")
    key = app.broker.workflows.keys("default").workflow("any")
    redis_client.set(key, pack_data(record, "a plan"))
    looked = _watch_lookups(app, monkeypatch)
    try:
        workflow(app, "any")
    except DecodeError as exc:
        assert key in str(exc)
    # what a view looks up is bounded by the packer's budgets, whatever the record
    for pairs in looked:
        assert len(pairs) <= TASKS_SHOWN
        assert all(len(queue) <= MAX_NAME for queue, _ in pairs)
    dashboard = Dashboard(app)
    for path in ("/workflow/any", "/api/workflow/any"):
        status, _, _ = call(dashboard, path)
        assert status == "200 OK", path
    assert _cli(app, monkeypatch, "workflow", "any") in (0, 1)
    assert _cli(app, monkeypatch, "workflow", "any", "--json") in (0, 1)
    capsys.readouterr()
