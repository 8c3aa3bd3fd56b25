"""tools/versus_bullmq's drivers read their options (nothing is run: no Node.js,
no Redis)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

FOLDER = Path(__file__).resolve().parents[2] / "tools" / "versus_bullmq"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"versus_{name}", FOLDER / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_run_defaults_measure_every_contender_on_both_tasks() -> None:
    run = load("run")
    args = run.parse([])
    assert (args.tasks, args.rounds, args.task) == (20_000, 3, ["incr", "noop"])
    assert [c.key for c in args.only] == [c.key for c in run.CONTENDERS]
    assert args.repo == run.ROOT


def test_run_picks_contenders_tasks_and_another_checkout(tmp_path: Path) -> None:
    run = load("run")
    args = run.parse(["--only", "bullmq-1x2", "--only", "thread-2", "--task", "noop",
                      "--rounds", "5", "--repo", str(tmp_path)])
    assert [c.key for c in args.only] == ["bullmq-1x2", "thread-2"]
    assert (args.task, args.rounds, args.repo) == (["noop"], 5, tmp_path.resolve())
    assert args.python == sys.executable  # that checkout has no .venv


def test_bench_rows_defaults_to_prefetch_1_and_100() -> None:
    rows = load("bench_rows")
    assert rows.parse([]).prefetch == [1, 100]
    assert rows.parse(["--prefetch", "10"]).prefetch == [10]
