"""``minitask tasks`` lines its columns up whatever the cells hold: each column is as
wide as its widest cell (a long retry_on list or task name no longer shifts the rest)."""
from __future__ import annotations

from typing import List

import pytest

from minitask.cli import main
from minitask.cli.tasks import columns


def starts(line: str, header: List[str], cells: List[str]) -> List[int]:
    found, at = [], 0
    for cell in cells:
        at = line.index(cell, at)
        found.append(at)
        at += len(cell)
    return found


def test_every_column_starts_where_its_header_starts_and_numbers_end_with_it() -> None:
    table = [("task", "prio", "retry on", "limits"),
             ("a.very.long.task.name.indeed", "5", "ConnectionError,TimeoutError", "-"),
             ("b", "10", "-", "max 3")]
    header, *rows = columns(table, numeric=(1,))
    for row, cells in zip(rows, table[1:]):
        left = starts(row, [], [cells[0], cells[2], cells[3]])
        assert left == starts(header, [], ["task", "retry on", "limits"])
        assert row.index(cells[1]) + len(cells[1]) == header.index("prio") + len("prio")


def test_the_command_prints_aligned_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "-A", "examples.orders.tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("task "))
    rows = [line for line in lines[lines.index(header) + 1:] if line]
    column = header.index("limits")
    assert rows and all(row[column - 2:column] == "  " and row[column] != " " for row in rows)
