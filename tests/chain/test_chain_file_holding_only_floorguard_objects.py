"""The chain's file holds floorguard's three tables and SQLite's own, and nothing else: an
object planted there under a name or a type meant to pass for one of them (an index, a
trigger named like a table, a trigger on the metadata alone, a schema row edited by hand)
refuses every append and every read, naming it. A tree is built only over records that
hold together, and `chain prove` without `--checkpoint` refuses a chain behind what this
host has seen, recording the refusal on the host.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.long_lived_prover import LongLivedHost, count_rows, refusals, tamper

# A long attack suite: run by .ci/run after the README's command.
pytestmark = pytest.mark.attack

AS_AN_INDEX = ("CREATE INDEX planted ON records(ts)",)
A_TRIGGER_NAMED_LIKE_A_TABLE = (
    "CREATE TRIGGER records BEFORE INSERT ON tree BEGIN SELECT RAISE(IGNORE); END",
)
A_TRIGGER_NAMED_IN_ODD_CASE = (
    'CREATE TRIGGER "Meta" AFTER INSERT ON records BEGIN DELETE FROM tree; END',
)
ON_THE_METADATA_ONLY = (
    "CREATE TRIGGER planted BEFORE UPDATE ON meta BEGIN SELECT RAISE(IGNORE); END",
)
IN_ONE_TRANSACTION_WITH_A_METADATA_WRITE = (
    "BEGIN IMMEDIATE",
    "CREATE TRIGGER planted BEFORE INSERT ON records BEGIN SELECT RAISE(IGNORE); END",
    "UPDATE meta SET value = value",
    "COMMIT",
)
# A trigger written into the schema by hand under a name SQLite keeps for its own objects
# (SQLite itself refuses that name to CREATE TRIGGER, and runs the row all the same).
DISGUISED_AS_SQLITES_OWN_INDEX = (
    "PRAGMA writable_schema = ON",
    "INSERT INTO sqlite_master VALUES ('trigger', 'sqlite_autoindex_records_9', 'records', 0, "
    "'CREATE TRIGGER sqlite_autoindex_records_9 BEFORE INSERT ON records "
    "BEGIN SELECT RAISE(IGNORE); END')",
    "PRAGMA writable_schema = OFF",
)
PLANTED = {
    "an-index": AS_AN_INDEX,
    "a-trigger-named-records": A_TRIGGER_NAMED_LIKE_A_TABLE,
    "a-trigger-named-Meta": A_TRIGGER_NAMED_IN_ODD_CASE,
    "a-trigger-on-meta-only": ON_THE_METADATA_ONLY,
    "in-one-transaction": IN_ONE_TRANSACTION_WITH_A_METADATA_WRITE,
    "a-schema-row-disguised": DISGUISED_AS_SQLITES_OWN_INDEX,
}


def _floorctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floorctl", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def _refused_in_words(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr


@pytest.mark.parametrize("planted", PLANTED.values(), ids=PLANTED.keys())
def test_an_object_passing_for_floorguards_own_refuses_appends_and_reads_naming_it(
    host: LongLivedHost, home: Path, env: dict[str, str], aider: Path,
    planted: tuple[str, ...],
) -> None:  # fmt: skip
    tamper(home, *planted)
    answers = [host.preflight(aider), host.prove(2)]
    with LongLivedHost(env) as fresh:
        answers.append(fresh.preflight(aider))
    for answer in answers:
        assert "floorguard does not make" in answer.get("refused", ""), answer
    assert count_rows(home, "records") == 5
    for command in (("chain", "prove", "--seq", "2"), ("chain", "export")):
        done = _floorctl(env, *command)
        assert _refused_in_words(done), done
        assert "floorguard does not make" in done.stderr, done


def test_a_chain_file_with_a_trigger_renamed_over_the_open_one_is_refused(
    host: LongLivedHost, home: Path, tmp_path: Path, aider: Path
) -> None:
    tamper(home, "PRAGMA wal_checkpoint(TRUNCATE)")
    copy = tmp_path / "planted.sqlite3"
    source = sqlite3.connect(home / "chain.sqlite3")
    target = sqlite3.connect(copy)
    source.backup(target)
    source.close()
    target.execute(DISGUISED_AS_SQLITES_OWN_INDEX[0].replace("ON", "OFF"))
    target.execute(
        "CREATE TRIGGER planted BEFORE INSERT ON records BEGIN SELECT RAISE(IGNORE); END"
    )
    target.commit()
    target.close()
    copy.replace(home / "chain.sqlite3")
    answer = host.preflight(aider)
    assert "floorguard does not make" in answer.get("refused", ""), answer


def _drop_the_tree_and(home: Path, *statements: str) -> None:
    tamper(home, "DELETE FROM tree", *statements)
    (home / "chain-view").unlink()


def _records_columns(home: Path) -> list[str]:
    conn = sqlite3.connect(home / "chain.sqlite3")
    try:
        return [row[1] for row in conn.execute("PRAGMA table_info(records)")]
    finally:
        conn.close()


UNHELD = {
    "an-event-stored-as-a-blob": "UPDATE records SET event = CAST(event AS BLOB) WHERE seq = 4",
    "a-chain-id-stored-as-a-blob": (
        "UPDATE records SET chain_id = CAST(chain_id AS BLOB) WHERE seq = 4"
    ),
    "a-mac-stored-as-a-blob": "UPDATE records SET mac = CAST(mac AS BLOB) WHERE seq = 4",
    "a-prev-stored-as-a-blob": "UPDATE records SET prev = CAST(prev AS BLOB) WHERE seq = 4",
    "a-receipt-stored-as-a-blob": (
        "UPDATE records SET receipt = CAST(receipt AS BLOB) WHERE seq = 4"
    ),
    "a-ts-stored-as-a-number": "UPDATE records SET ts = 20261204 WHERE seq = 4",
    "a-gap-in-seq": "UPDATE records SET seq = 7 WHERE seq = 4",
    "a-gap-below-the-head": "UPDATE records SET seq = seq + 3 WHERE seq >= 2",
    "a-receipt-id-with-a-trailing-space": (
        "UPDATE records SET receipt_id = receipt_id || ' ' WHERE seq = 4"
    ),
    "a-prev-with-a-trailing-space": "UPDATE records SET prev = prev || ' ' WHERE seq = 4",
    "a-receipt-rewritten": "UPDATE records SET receipt = replace(receipt, '1', '2') WHERE seq = 4",
}


@pytest.mark.parametrize(
    "rewrite",
    [
        pytest.param(
            statement,
            id=name,
        )
        for name, statement in UNHELD.items()
    ],
)
def test_no_tree_is_built_over_a_record_that_does_not_hold_together(
    host: LongLivedHost, home: Path, env: dict[str, str], rewrite: str
) -> None:
    host.close()
    _drop_the_tree_and(home, rewrite)
    proved = _floorctl(env, "chain", "prove", "--seq", "0")
    assert _refused_in_words(proved), proved
    with LongLivedHost(env) as fresh:
        answer = fresh.ask("append")
    assert "refused" in answer, answer
    assert count_rows(home, "tree") == 0


def test_a_proof_without_a_checkpoint_refuses_a_chain_rolled_back_behind_this_host(
    host: LongLivedHost, home: Path, env: dict[str, str]
) -> None:
    host.close()
    assert (home / "chain-view").exists()
    tamper(
        home, "DELETE FROM records WHERE seq = 4", "DELETE FROM tree WHERE level = 0 AND idx = 4"
    )
    proved = _floorctl(env, "chain", "prove", "--seq", "1")
    assert _refused_in_words(proved), proved
    assert refusals(home), "the refusal is recorded on the host"


def test_a_proof_without_a_checkpoint_refuses_a_fork_of_what_this_host_saw(
    host: LongLivedHost, home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    tamper(home, "PRAGMA wal_checkpoint(TRUNCATE)")
    backup = tmp_path / "backup.sqlite3"
    shutil.copy(home / "chain.sqlite3", backup)
    host.appended(2)
    host.close()
    view = (home / "chain-view").read_bytes()
    # The older copy restored and grown past what the host saw, by another host's hand.
    other = tmp_path / "other"
    other_env = {**env, "FLOORGUARD_HOME": str(other)}
    other.mkdir()
    shutil.copy(backup, other / "chain.sqlite3")
    shutil.copy(home / "chain.key", other / "chain.key")
    with LongLivedHost(other_env) as forger:
        forger.appended(4)
    tamper(other, "PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(other / "chain.sqlite3", home / "chain.sqlite3")
    assert (home / "chain-view").read_bytes() == view
    proved = _floorctl(env, "chain", "prove", "--seq", "1")
    assert _refused_in_words(proved), proved
    assert any("fork" in json.dumps(r) or "root" in json.dumps(r) for r in refusals(home))


def test_a_rebuilt_tree_over_a_record_whose_mac_was_rewritten_is_refused_as_a_fork(
    host: LongLivedHost, home: Path, env: dict[str, str]
) -> None:
    host.close()
    # (its first hex digit changed: a MAC may hold no 'a' to replace, one time in 60)
    rewrite = (
        "UPDATE records SET mac = CASE WHEN substr(mac, 1, 1) = '0' THEN '1' ELSE '0' END"
        " || substr(mac, 2) WHERE seq = 2"
    )
    tamper(home, "DELETE FROM tree", rewrite)
    proved = _floorctl(env, "chain", "prove", "--seq", "0")
    assert _refused_in_words(proved), proved
    assert refusals(home), "the refusal is recorded on the host"
    with LongLivedHost(env) as fresh:
        answer = fresh.ask("append")
    assert "refused" in answer, answer
    assert count_rows(home, "records") == 5


def test_a_proof_needing_a_stored_node_that_was_rewritten_is_refused(
    host: LongLivedHost, home: Path, env: dict[str, str]
) -> None:
    host.close()
    # Leaf 1's node is on record 0's audit path but not under the root kept by the host.
    tamper(home, "UPDATE tree SET hash = zeroblob(32) WHERE level = 0 AND idx = 1")
    proved = _floorctl(env, "chain", "prove", "--seq", "0")
    assert _refused_in_words(proved), proved


def test_a_virtual_table_in_the_chain_file_refuses_the_append_naming_it(
    host: LongLivedHost, home: Path, aider: Path
) -> None:
    tamper(home, "CREATE VIRTUAL TABLE planted USING fts5(body)")
    answer = host.preflight(aider)
    assert "floorguard does not make" in answer.get("refused", ""), answer
    assert "planted" in answer["refused"], answer


def test_statistics_sqlite_keeps_for_itself_do_not_stop_the_chain(
    host: LongLivedHost, home: Path, aider: Path
) -> None:
    tamper(home, "ANALYZE")
    decision = host.preflight(aider)
    assert decision.get("verdict") == "permit", decision


# A record field stored as bytes rather than text, the tree and the host view left intact.
AS_BYTES = {
    "the-head-event": "UPDATE records SET event = CAST(event AS BLOB) WHERE seq = 4",
    "the-head-chain-id": "UPDATE records SET chain_id = CAST(chain_id AS BLOB) WHERE seq = 4",
}


@pytest.mark.parametrize("rewrite", AS_BYTES.values(), ids=AS_BYTES.keys())
def test_a_head_record_holding_bytes_refuses_the_append_and_the_spawn_in_words(
    host: LongLivedHost, home: Path, env: dict[str, str], aider: Path, rewrite: str
) -> None:
    tamper(home, rewrite)
    assert "refused" in host.ask("append")
    assert host.preflight(aider).get("spawn")
    with LongLivedHost(env) as fresh:
        assert "refused" in fresh.ask("append")
    assert count_rows(home, "records") == 5


@pytest.mark.parametrize(
    "command",
    [("chain", "prove", "--seq", "2"), ("chain", "export"), ("chain", "checkpoint")],
    ids=["prove", "export", "checkpoint"],
)
def test_a_record_holding_bytes_refuses_proofs_exports_and_checkpoints_in_words(
    host: LongLivedHost, home: Path, env: dict[str, str], command: tuple[str, ...]
) -> None:
    host.close()
    tamper(home, "UPDATE records SET receipt_id = CAST(receipt_id AS BLOB) WHERE seq = 2")
    done = _floorctl(env, *command)
    assert "record 2 holds a value that is not text" in done.stderr, done
    if command[1] == "export":
        # Export streams to standard output: the records before the bad one may be out,
        # whole lines only, and the exit status says the slice is not whole.
        assert done.returncode == 1 and "Traceback" not in done.stderr, done
        assert [json.loads(line)["seq"] for line in done.stdout.splitlines()] == [0, 1]
        return
    assert _refused_in_words(done), done


def test_a_proof_without_a_checkpoint_refuses_another_chain_put_in_place_of_the_one_seen(
    host: LongLivedHost, home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    host.close()
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(home / "chain.key", other / "chain.key")
    with LongLivedHost({**env, "FLOORGUARD_HOME": str(other)}) as stranger:
        stranger.appended(6)
    tamper(other, "PRAGMA wal_checkpoint(TRUNCATE)")
    for name in ("chain.sqlite3-wal", "chain.sqlite3-shm"):
        (home / name).unlink(missing_ok=True)
    shutil.copy(other / "chain.sqlite3", home / "chain.sqlite3")
    conn = sqlite3.connect(home / "chain.sqlite3")
    receipt_id = conn.execute("SELECT receipt_id FROM records WHERE seq = 0").fetchone()[0]
    conn.close()
    proved = _floorctl(env, "chain", "prove", "--receipt-id", receipt_id)
    assert _refused_in_words(proved), proved
    assert refusals(home), "the refusal is recorded on the host"
