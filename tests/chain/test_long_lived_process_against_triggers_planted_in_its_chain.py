"""A trigger planted in the chain's file between two appends of a long-lived host process:
it drops the process's own inserts, or rewrites what they stored, inside the process's own
transaction.

No decision may be returned before its receipt is durably in the chain, and a chain only
this host writes refuses a last record that does not verify; a tree that no longer holds
the nodes the process wrote is a fork. The process must notice what its own commits left,
as a fresh process of the same host does.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import isolated_env
from helpers.long_lived_prover import LongLivedHost, count_rows, refusals, tamper
from hosts import write_script

DROP_RECORD_INSERTS = (
    "CREATE TRIGGER planted BEFORE INSERT ON records BEGIN SELECT RAISE(IGNORE); END"
)
RECORDS_AS_A_VIEW_THAT_KEEPS_NOTHING = (
    "ALTER TABLE records RENAME TO kept",
    "CREATE VIEW records AS SELECT * FROM kept",
    "CREATE TRIGGER planted INSTEAD OF INSERT ON records BEGIN SELECT 1; END",
)
PERMITS_STORED_AS_REFUSALS = (
    "CREATE TRIGGER planted AFTER INSERT ON records BEGIN UPDATE records SET receipt = "
    """replace(receipt, '"verdict":"permit"', '"verdict":"refuse"') WHERE seq = NEW.seq; END"""
)
DROP_TREE_INSERTS = "CREATE TRIGGER planted BEFORE INSERT ON tree BEGIN SELECT RAISE(IGNORE); END"
ZERO_STORED_NODES = (
    "CREATE TRIGGER planted AFTER INSERT ON tree BEGIN UPDATE tree SET hash = zeroblob(32) "
    "WHERE level = NEW.level AND idx = NEW.idx; END"
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return isolated_env(tmp_path)


@pytest.fixture
def home(env: dict[str, str]) -> Path:
    return Path(env["FLOORGUARD_HOME"])


@pytest.fixture
def aider(tmp_path: Path) -> Path:
    return write_script(tmp_path / "bin" / "aider", "echo 'aider 0.70.0'")


@pytest.fixture
def host(env: dict[str, str]) -> Iterator[LongLivedHost]:
    with LongLivedHost(env) as process:
        process.appended(5)
        yield process


def _floorctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floorctl", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def _fresh_preflight(env: dict[str, str], aider: Path) -> dict[str, Any]:
    with LongLivedHost(env) as fresh:
        return fresh.preflight(aider)


def _stored_receipt_ids(home: Path) -> list[str]:
    conn = sqlite3.connect(home / "chain.sqlite3")
    try:
        return [row[0] for row in conn.execute("SELECT receipt_id FROM records ORDER BY seq")]
    finally:
        conn.close()


@pytest.mark.xfail(
    strict=True,
    reason="the permit is returned although the planted trigger stored no record of it",
)
@pytest.mark.parametrize(
    "planted",
    [(DROP_RECORD_INSERTS,), RECORDS_AS_A_VIEW_THAT_KEEPS_NOTHING],
    ids=["a-trigger-ignoring-inserts", "a-view-keeping-nothing"],
)
def test_a_permit_is_never_returned_when_its_record_was_not_stored(
    host: LongLivedHost, home: Path, aider: Path, planted: tuple[str, ...]
) -> None:
    tamper(home, *planted)
    answer = host.preflight(aider)
    if "refused" not in answer:
        assert answer["receipt_id"] in _stored_receipt_ids(home), answer
    assert count_rows(home, "records") == 5


def test_the_next_decision_after_an_unstored_permit_is_refused_as_a_rollback_and_recorded(
    host: LongLivedHost, home: Path, aider: Path
) -> None:
    tamper(home, DROP_RECORD_INSERTS)
    host.preflight(aider)
    refused = host.preflight(aider)
    assert refused.get("spawn") and "rollback" in refused["refused"], refused
    assert count_rows(home, "records") == 5
    [refusal] = refusals(home)
    # fleet.md: the time, the kind, the chain, the size and root remembered and found, and
    # the record that was not written, receipt included.
    assert refusal["event"] == "rollback"
    assert refusal["remembered"]["size"] == 6 and refusal["found"]["size"] == 5
    assert refusal["refused"]["event"] == "adapter.spawn_preflight_receipt"
    assert refusal["refused"]["receipt"]["verdict"] == "permit"
    assert {"ts", "chain_id", "location"} <= set(refusal)


@pytest.mark.xfail(
    strict=True,
    reason="the long-lived process appends after its own record that a trigger rewrote, "
    "on the head it kept, and never reads the stored head again",
)
def test_a_trigger_rewriting_each_stored_permit_stops_the_process_at_the_next_append(
    host: LongLivedHost, home: Path, aider: Path
) -> None:
    tamper(home, PERMITS_STORED_AS_REFUSALS)
    first = host.preflight(aider)
    assert first.get("verdict") == "permit", first  # written before anything was rewritten
    later = [host.preflight(aider) for _ in range(2)]
    assert all("refused" in answer for answer in later), later


def test_a_fresh_process_refuses_the_chain_whose_last_permit_a_trigger_rewrote(
    host: LongLivedHost, home: Path, env: dict[str, str], aider: Path
) -> None:
    tamper(home, PERMITS_STORED_AS_REFUSALS)
    decision = host.preflight(aider)
    assert decision.get("verdict") == "permit", decision
    assert decision["receipt_id"] in _stored_receipt_ids(home)
    answer = _fresh_preflight(env, aider)
    assert answer.get("spawn") and "does not verify" in answer["refused"], answer


@pytest.mark.xfail(
    strict=True,
    reason="the long-lived process goes on appending on the tree edge it kept while a "
    "trigger keeps its nodes out of the stored tree (a fresh process refuses that tree)",
)
def test_a_trigger_keeping_tree_nodes_out_stops_the_process_at_the_next_append(
    host: LongLivedHost, home: Path, aider: Path
) -> None:
    tamper(home, DROP_TREE_INSERTS)
    host.preflight(aider)
    later = [host.preflight(aider) for _ in range(2)]
    assert all("refused" in answer for answer in later), later


@pytest.mark.xfail(
    strict=True,
    reason="the long-lived process goes on appending while a trigger zeroes every node it "
    "stores; a fresh process refuses the same chain as a fork and records it",
)
def test_a_trigger_zeroing_stored_nodes_stops_the_process_at_the_next_append(
    host: LongLivedHost, home: Path, aider: Path
) -> None:
    tamper(home, ZERO_STORED_NODES)
    host.preflight(aider)
    later = [host.preflight(aider) for _ in range(2)]
    assert all("refused" in answer for answer in later), later
    assert [r["event"] for r in refusals(home)] == ["fork", "fork"]


@pytest.mark.parametrize(
    "planted_and_refusal",
    [(DROP_TREE_INSERTS, "lacks subtree"), (ZERO_STORED_NODES, "a fork")],
    ids=["nodes-kept-out", "nodes-zeroed"],
)
def test_a_fresh_process_refuses_the_tree_a_planted_trigger_left(
    host: LongLivedHost, home: Path, env: dict[str, str], aider: Path,
    planted_and_refusal: tuple[str, str],
) -> None:  # fmt: skip
    planted, refusal = planted_and_refusal
    tamper(home, planted)
    host.preflight(aider)
    answer = _fresh_preflight(env, aider)
    assert answer.get("spawn") and refusal in answer["refused"], answer
    if "The refusal is recorded in" in answer["refused"]:
        [recorded] = refusals(home)
        assert recorded["message"] in answer["refused"]
        assert recorded["refused"]["receipt"]["verdict"] == "permit"


@pytest.mark.parametrize(
    "planted", [DROP_TREE_INSERTS, ZERO_STORED_NODES], ids=["nodes-kept-out", "nodes-zeroed"]
)
def test_no_proof_or_checkpoint_comes_from_the_tree_a_planted_trigger_left(
    host: LongLivedHost, home: Path, env: dict[str, str], aider: Path, planted: str
) -> None:
    tamper(home, planted)
    for _ in range(3):
        host.preflight(aider)  # permitted or not, the records are what proofs are made of
    assert "refused" in host.prove(6)
    proved = _floorctl(env, "chain", "prove", "--seq", "6")
    assert proved.returncode == 1 and proved.stdout == "", proved
    assert "Traceback" not in proved.stderr
    signed = _floorctl(env, "chain", "checkpoint")
    assert signed.returncode == 1 and signed.stdout == "", signed
    assert "refusing to sign" in signed.stderr


@pytest.mark.xfail(
    strict=True,
    reason="the long-lived process goes on appending while a trigger deletes the chain's "
    "metadata with each of its records; a fresh process refuses that chain",
)
def test_a_trigger_deleting_the_metadata_stops_the_process_where_a_fresh_one_stops(
    host: LongLivedHost, home: Path, env: dict[str, str], aider: Path
) -> None:
    tamper(home, "CREATE TRIGGER planted AFTER INSERT ON records BEGIN DELETE FROM meta; END")
    host.preflight(aider)
    later = [host.preflight(aider) for _ in range(2)]
    answer = _fresh_preflight(env, aider)
    assert "metadata does not name the chain" in answer.get("refused", ""), answer
    assert all("refused" in answer for answer in later), later


@pytest.mark.parametrize(
    "planted",
    [
        "CREATE TRIGGER planted BEFORE INSERT ON records BEGIN SELECT RAISE(ABORT, 'no'); END",
        "CREATE TRIGGER planted BEFORE INSERT ON records BEGIN SELECT RAISE(ROLLBACK, 'no'); END",
        "CREATE TRIGGER planted BEFORE INSERT ON tree BEGIN SELECT RAISE(FAIL, 'no'); END",
        "CREATE TRIGGER planted AFTER INSERT ON tree BEGIN SELECT RAISE(ROLLBACK, 'no'); END",
        "CREATE TRIGGER planted BEFORE INSERT ON records BEGIN SELECT no_such_function(); END",
    ],
    ids=["abort-record", "rollback-record", "fail-node", "rollback-after-node", "unknown-function"],
)
def test_a_trigger_failing_the_insert_refuses_the_spawn_in_words_and_writes_nothing(
    host: LongLivedHost, home: Path, env: dict[str, str], aider: Path, planted: str
) -> None:
    tamper(home, planted)
    for answer in [host.preflight(aider) for _ in range(2)] + [_fresh_preflight(env, aider)]:
        assert answer.get("spawn") and "could not be recorded" in answer["refused"], answer
    assert count_rows(home, "records") == 5
    assert count_rows(home, "tree") == 8
