"""A trigger or a view planted in the chain's file between two appends of a long-lived host
process: it could drop the process's own inserts, or rewrite what they stored, inside the
process's own transaction, where SQLite's data version does not see it.

floorguard's chain file holds its own three tables and nothing else that acts: a trigger or
a view there refuses every append from then on (the first one included), in words naming
it, with nothing written, in the process that appended before as in a fresh one; proofs
and checkpoints refuse it too. Dropping it lets the chain be written again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.long_lived_prover import LongLivedHost, count_rows, tamper

# A long attack suite: run by .ci/run after the README's command.
pytestmark = pytest.mark.attack

DROP_RECORD_INSERTS = (
    "CREATE TRIGGER planted BEFORE INSERT ON records BEGIN SELECT RAISE(IGNORE); END",
)
RECORDS_AS_A_VIEW_THAT_KEEPS_NOTHING = (
    "ALTER TABLE records RENAME TO kept",
    "CREATE VIEW records AS SELECT * FROM kept",
    "CREATE TRIGGER planted INSTEAD OF INSERT ON records BEGIN SELECT 1; END",
)
PERMITS_STORED_AS_REFUSALS = (
    "CREATE TRIGGER planted AFTER INSERT ON records BEGIN UPDATE records SET receipt = "
    """replace(receipt, '"verdict":"permit"', '"verdict":"refuse"') WHERE seq = NEW.seq; END""",
)
DROP_TREE_INSERTS = (
    "CREATE TRIGGER planted BEFORE INSERT ON tree BEGIN SELECT RAISE(IGNORE); END",
)
ZERO_STORED_NODES = (
    "CREATE TRIGGER planted AFTER INSERT ON tree BEGIN UPDATE tree SET hash = zeroblob(32) "
    "WHERE level = NEW.level AND idx = NEW.idx; END",
)
DELETE_THE_METADATA = (
    "CREATE TRIGGER planted AFTER INSERT ON records BEGIN DELETE FROM meta; END",
)
FAILING = {
    "abort-record": "BEFORE INSERT ON records BEGIN SELECT RAISE(ABORT, 'no'); END",
    "rollback-record": "BEFORE INSERT ON records BEGIN SELECT RAISE(ROLLBACK, 'no'); END",
    "fail-node": "BEFORE INSERT ON tree BEGIN SELECT RAISE(FAIL, 'no'); END",
    "rollback-after-node": "AFTER INSERT ON tree BEGIN SELECT RAISE(ROLLBACK, 'no'); END",
    "unknown-function": "BEFORE INSERT ON records BEGIN SELECT no_such_function(); END",
}
PLANTED = {
    "a-trigger-ignoring-inserts": DROP_RECORD_INSERTS,
    "a-view-keeping-nothing": RECORDS_AS_A_VIEW_THAT_KEEPS_NOTHING,
    "permits-stored-as-refusals": PERMITS_STORED_AS_REFUSALS,
    "nodes-kept-out": DROP_TREE_INSERTS,
    "nodes-zeroed": ZERO_STORED_NODES,
    "metadata-deleted": DELETE_THE_METADATA,
    **{name: (f"CREATE TRIGGER planted {body}",) for name, body in FAILING.items()},
}


def _floorctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floorctl", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def _names_the_planted_object(answer: dict[str, Any]) -> bool:
    refused = answer.get("refused", "")
    return "floorguard does not make" in refused and "planted" in refused


@pytest.mark.parametrize("planted", PLANTED.values(), ids=PLANTED.keys())
def test_every_append_after_something_is_planted_is_refused_naming_it_and_writes_nothing(
    host: LongLivedHost, home: Path, env: dict[str, str], aider: Path,
    planted: tuple[str, ...],
) -> None:  # fmt: skip
    tamper(home, *planted)
    answers = [host.preflight(aider) for _ in range(2)]
    with LongLivedHost(env) as fresh:
        answers.append(fresh.preflight(aider))
    for answer in answers:
        assert answer.get("spawn") and "could not be recorded" in answer["refused"], answer
        assert _names_the_planted_object(answer), answer
    assert count_rows(home, "records") == 5
    assert count_rows(home, "tree") == 8


def test_the_chain_is_written_again_once_the_planted_trigger_is_dropped(
    host: LongLivedHost, home: Path, aider: Path
) -> None:
    tamper(home, *DROP_RECORD_INSERTS)
    assert "refused" in host.preflight(aider)
    tamper(home, "DROP TRIGGER planted")
    decision = host.preflight(aider)
    assert decision.get("verdict") == "permit", decision
    assert count_rows(home, "records") == 6


@pytest.mark.parametrize(
    "planted",
    [DROP_TREE_INSERTS, ZERO_STORED_NODES, RECORDS_AS_A_VIEW_THAT_KEEPS_NOTHING],
    ids=["nodes-kept-out", "nodes-zeroed", "records-a-view"],
)
def test_no_proof_or_checkpoint_comes_from_a_chain_with_something_planted(
    host: LongLivedHost, env: dict[str, str], home: Path, planted: tuple[str, ...]
) -> None:
    tamper(home, *planted)
    answer = host.prove(3)
    assert _names_the_planted_object(answer), answer
    proved = _floorctl(env, "chain", "prove", "--seq", "3")
    assert proved.returncode == 1 and proved.stdout == "", proved
    assert "floorguard does not make" in proved.stderr and "Traceback" not in proved.stderr
    signed = _floorctl(env, "chain", "checkpoint")
    assert signed.returncode == 1 and signed.stdout == "", signed
    assert "floorguard does not make" in signed.stderr
    exported = _floorctl(env, "chain", "export")
    assert exported.returncode == 1 and exported.stdout == "", exported


@pytest.mark.parametrize(
    "planted",
    [DROP_TREE_INSERTS, ZERO_STORED_NODES, RECORDS_AS_A_VIEW_THAT_KEEPS_NOTHING],
    ids=["nodes-kept-out", "nodes-zeroed", "records-a-view"],
)
def test_a_process_that_proved_before_refuses_its_next_proof_once_something_is_planted(
    host: LongLivedHost, home: Path, planted: tuple[str, ...]
) -> None:
    # The process's read connection, kept between proofs, has found the file floorguard's
    # own: what it found must not outlive a change made from another connection.
    assert "proof" in host.prove(3)
    assert "proof" in host.prove(4)
    tamper(home, *planted)
    assert _names_the_planted_object(host.prove(3))


def test_a_process_that_proved_before_proves_records_appended_since(
    host: LongLivedHost, env: dict[str, str]
) -> None:
    assert host.prove(4)["proof"]["tree_size"] == 5
    with LongLivedHost(env) as other:
        other.appended(3)
    proof = host.prove(7)["proof"]
    assert (proof["tree_size"], proof["leaf_index"]) == (8, 7)
    assert host.prove(4)["proof"]["tree_size"] == 8
    assert host.appended(1) == [8]  # (its own append: another connection of the process)
    assert host.prove(8)["proof"]["tree_size"] == 9
