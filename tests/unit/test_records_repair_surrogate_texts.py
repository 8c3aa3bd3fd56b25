"""Text of the app's code that UTF-8 cannot carry (a lone surrogate: ``os.fsdecode`` of a
file name, ``ValueError("bad \\udcff")``) is recorded with U+FFFD in its place in every
record minitask packs, as in an outcome: packing the record of recent outcomes raised an
EncodeError, which dead-lettered the task on attempt 1 as an internal error."""
from __future__ import annotations

from minitask.stores.recent import pack_entry, unpack_entry
from minitask.stores.workflow_reads import Failure
from minitask.wire.message import Outcome, texts_repaired
from minitask.wire.serializer import decode_outcome, encode_outcome, pack_data, unpack_data


def test_the_recent_outcomes_entry_of_a_surrogate_error_is_recorded() -> None:
    packed = pack_entry("id-1", "task", "dead", 1_000, 1, 0.5, "worker",
                        "ValueError: no file report-\udcff.csv")
    entry = unpack_entry("default", packed)
    assert entry is not None and entry.error == "ValueError: no file report-\ufffd.csv"


def test_a_workflow_failure_of_a_surrogate_error_is_recorded() -> None:
    failure = Failure("id-1", "step", "ValueError", "bad \udcff", "trace \udcff")
    assert Failure.unpacked(failure.packed()) == Failure("id-1", "step", "ValueError",
                                                         "bad \ufffd", "trace \ufffd")


def test_every_text_nested_in_a_record_is_repaired_and_nothing_else() -> None:
    data = {"k\udcff": ["a\ud800", ("b", 1, 2.5, None, b"\xff")], "n": True}
    assert unpack_data(pack_data(data, "a record"), "a record") == {
        "k\ufffd": ["a\ufffd", ["b", 1, 2.5, None, b"\xff"]], "n": True}
    assert texts_repaired("plain") == "plain"


def test_an_outcome_keeps_the_same_rule() -> None:
    outcome = decode_outcome(encode_outcome(Outcome("failed", 1, exc_type="ValueError",
                                                    message="bad \udcff")))
    assert outcome.message == "bad \ufffd"
