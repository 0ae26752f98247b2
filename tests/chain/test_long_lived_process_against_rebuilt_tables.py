"""The chain's tables rebuilt by hand beside a long-lived host process that has appended and
made proofs: the tree without its key and holding a node twice, with columns of other
types, as a view; the tree dropped under a rewritten record; the records table as a view,
without its key, or swapped with the tree.

What is signed must back every proof, and a proof is only ever of a record the tree and the
records agree on: whatever is handed out verifies against a checkpoint signed before the
tampering, and whatever is refused is refused in words (no traceback, no crash of the
process).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import isolated_env
from helpers.long_lived import backup_chain, restore_chain
from helpers.long_lived_prover import LongLivedHost, count_rows, refusals, tamper

pytestmark = pytest.mark.attack  # forged trees and proofs, a minute in all: run by .ci/run

RECORDS = 8  # a full tree: root (3, 0); record 0's path is (0, 1), (1, 1), (2, 1)
NODE_TWICE = "INSERT INTO tree VALUES (1, 1, zeroblob(32))"
REWRITE_RECORD_2 = (
    "UPDATE records SET receipt = "
    """replace(receipt, '"schema_version":1', '"schema_version":2') WHERE seq = 2"""
)


def _rebuilt(table: str, columns: str, select: str) -> tuple[str, ...]:
    return (
        f"CREATE TABLE rebuilt ({columns})",
        f"INSERT INTO rebuilt SELECT {select} FROM {table}",  # noqa: S608
        f"DROP TABLE {table}",
        f"ALTER TABLE rebuilt RENAME TO {table}",
    )


TREE_WITHOUT_KEY = _rebuilt("tree", "level, idx, hash", "level, idx, hash")
RECORDS_WITHOUT_KEY = _rebuilt(
    "records",
    "seq, ts, chain_id, event, receipt_id, receipt, prev, mac",
    "seq, ts, chain_id, event, receipt_id, receipt, prev, mac",
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return isolated_env(tmp_path / "state")


@pytest.fixture
def home(env: dict[str, str]) -> Path:
    return Path(env["FLOORGUARD_HOME"])


@pytest.fixture
def host(env: dict[str, str]) -> Iterator[LongLivedHost]:
    with LongLivedHost(env) as process:
        process.appended(RECORDS)
        for seq in (0, 3, RECORDS - 1):  # the process has read the tables whole
            assert "proof" in process.prove(seq)
        yield process


@pytest.fixture
def signed(host: LongLivedHost, env: dict[str, str], tmp_path: Path) -> tuple[Path, Path]:
    """A checkpoint of the untouched chain, and the public key that verifies it."""
    keys = tmp_path / "keys"
    assert _floorctl(env, "keygen", "--out", str(keys)).returncode == 0
    note = tmp_path / "before.txt"
    done = _floorctl(env, "chain", "checkpoint", "--signing-key", str(keys / "signing.key"),
                     "--out", str(note))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return note, keys / "signing.pub"


@dataclass
class Scene:
    """A long-lived process that appended and proved, and a checkpoint signed before."""

    host: LongLivedHost
    home: Path
    env: dict[str, str]
    signed: tuple[Path, Path]
    tmp: Path


@pytest.fixture
def scene(
    host: LongLivedHost, home: Path, env: dict[str, str], signed: tuple[Path, Path],
    tmp_path: Path,
) -> Scene:  # fmt: skip
    return Scene(host, home, env, signed, tmp_path)


def _floorctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floorctl", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def _refused_in_words(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 1 and done.stdout == "", done
    assert "floorctl: error: " in done.stderr and "Traceback" not in done.stderr, done.stderr


def _proof_verifies(
    proof: dict[str, Any], signed: tuple[Path, Path], env: dict[str, str], tmp_path: Path
) -> bool:
    path = tmp_path / "proof.json"
    path.write_text(json.dumps(proof))
    note, pub = signed
    done = _floorctl(env, "verify", "inclusion", str(path), "--checkpoint", str(note),
                     "--pubkey", str(pub))  # fmt: skip
    assert "Traceback" not in done.stderr
    return done.returncode == 0


def _cli_proof(env: dict[str, str], seq: int, note: Path | None = None) -> dict[str, Any] | None:
    """The proof ``floorctl chain prove`` hands out, or None when it refuses in words."""
    extra = ["--checkpoint", str(note)] if note is not None else []
    done = _floorctl(env, "chain", "prove", "--seq", str(seq), *extra)
    if done.returncode != 0:
        _refused_in_words(done)
        return None
    proof: dict[str, Any] = json.loads(done.stdout)
    return proof


def _every_proof_handed_out_verifies(
    host: LongLivedHost, env: dict[str, str], signed: tuple[Path, Path], tmp_path: Path
) -> set[int]:
    """Each record of the signed tree proven by the process and by ``chain prove`` against
    the checkpoint signed before: what is handed out verifies. The seqs proven."""
    proven = set()
    for seq in range(RECORDS):
        answer = host.prove(seq)  # in the tree of the head, as large as the signed one
        if "proof" in answer and answer["proof"]["tree_size"] == RECORDS:
            assert _proof_verifies(answer["proof"], signed, env, tmp_path), (seq, answer)
        proof = _cli_proof(env, seq, signed[0])
        if proof is not None:
            assert _proof_verifies(proof, signed, env, tmp_path), (seq, proof)
            proven.add(seq)
    return proven


def _signs_only_what_the_records_make(env: dict[str, str], tmp_path: Path, pub: Path) -> None:
    """``chain checkpoint`` refuses, or signs a root that the records from genesis reach."""
    note = tmp_path / "after.txt"
    key = pub.with_name("signing.key")
    done = _floorctl(env, "chain", "checkpoint", "--signing-key", str(key), "--out", str(note))
    if done.returncode != 0:
        _refused_in_words(done)
        return
    slice_file = tmp_path / "slice.jsonl"
    assert _floorctl(env, "chain", "export", "--out", str(slice_file)).returncode == 0
    verified = _floorctl(env, "verify", "chain", str(slice_file), "--checkpoint", str(note),
                         "--pubkey", str(pub))  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_tree_rebuilt_without_its_key_holding_a_node_twice_proves_nothing_through_it(
    host: LongLivedHost, home: Path, env: dict[str, str], signed: tuple[Path, Path], tmp_path: Path
) -> None:
    tamper(home, *TREE_WITHOUT_KEY, NODE_TWICE)
    assert "refused" in host.prove(0)
    assert _cli_proof(env, 0) is None
    proven = _every_proof_handed_out_verifies(host, env, signed, tmp_path)
    assert 0 not in proven and 3 in proven  # record 3's path does not pass through (1, 1)


def _checkpoints_after_tampering(env: dict[str, str], signed: tuple[Path, Path]) -> None:
    """No new record: an incremental checkpoint re-reads nothing below the one kept, and may
    sign again (receipts-and-chain.md, a known gap), but only the root signed before;
    ``--full`` checks every record and node, and refuses."""
    key = str(signed[1].with_name("signing.key"))
    again = _floorctl(env, "chain", "checkpoint", "--signing-key", key)
    if again.returncode != 0:
        _refused_in_words(again)
    else:
        assert again.stdout.splitlines()[:3] == signed[0].read_text().splitlines()[:3]
    _refused_in_words(_floorctl(env, "chain", "checkpoint", "--full", "--signing-key", key))


def test_no_checkpoint_is_signed_over_a_tree_holding_a_node_twice(
    host: LongLivedHost, home: Path, env: dict[str, str], signed: tuple[Path, Path]
) -> None:
    tamper(home, *TREE_WITHOUT_KEY, NODE_TWICE)
    assert "refused" in host.ask("checkpoint")
    _checkpoints_after_tampering(env, signed)


@pytest.mark.parametrize(
    "rebuilt",
    [
        _rebuilt("tree", "level TEXT, idx TEXT, hash TEXT", "level, idx, hash"),
        _rebuilt("tree", "level, idx, hash", "CAST(level AS TEXT), CAST(idx AS TEXT), hash"),
        _rebuilt("tree", "level REAL, idx REAL, hash", "level, idx, hash"),
        _rebuilt("tree", "level, idx, hash", "level, idx, CAST(hash AS TEXT)"),
    ],
    ids=["text-columns", "numbers-as-text", "real-columns", "hashes-as-text"],
)
def test_a_tree_rebuilt_with_columns_of_other_types_backs_every_proof_and_checkpoint_or_none(
    scene: Scene, rebuilt: tuple[str, ...]
) -> None:
    host, home, env, signed, tmp_path = (
        scene.host, scene.home, scene.env, scene.signed, scene.tmp
    )  # fmt: skip
    tamper(home, *rebuilt)
    for _ in range(3):
        answer = host.ask("append")
        assert "seq" in answer or "refused" in answer, answer
    _every_proof_handed_out_verifies(host, env, signed, tmp_path)
    _signs_only_what_the_records_make(env, tmp_path, signed[1])


@pytest.mark.parametrize(
    "view",
    [
        ("ALTER TABLE tree RENAME TO stored", "CREATE VIEW tree AS SELECT * FROM stored"),
        (
            "ALTER TABLE tree RENAME TO stored",
            "CREATE VIEW tree AS SELECT * FROM stored",
            "CREATE TRIGGER forward INSTEAD OF INSERT ON tree BEGIN "
            "INSERT INTO stored VALUES (NEW.level, NEW.idx, NEW.hash); END",
        ),
        (
            "ALTER TABLE tree RENAME TO stored",
            "CREATE VIEW tree AS SELECT level, idx, zeroblob(32) AS hash FROM stored",
        ),
    ],
    ids=["a-view", "a-view-forwarding-inserts", "a-view-of-zero-hashes"],
)
def test_a_tree_replaced_by_a_view_beside_the_process_backs_every_proof_or_none(
    scene: Scene, view: tuple[str, ...]
) -> None:
    host, home, env, signed, tmp_path = (
        scene.host, scene.home, scene.env, scene.signed, scene.tmp
    )  # fmt: skip
    tamper(home, *view)
    host.ask("append")  # appended through the view, or refused in words: never a crash
    _every_proof_handed_out_verifies(host, env, signed, tmp_path)
    _signs_only_what_the_records_make(env, tmp_path, signed[1])


def test_a_tree_view_that_forwards_inserts_refuses_appends_naming_it(
    host: LongLivedHost, home: Path
) -> None:
    # Even a view that stores what it is given is not floorguard's tree: what acts inside
    # an append is refused, not trusted to behave.
    tamper(
        home,
        "ALTER TABLE tree RENAME TO stored",
        "CREATE VIEW tree AS SELECT * FROM stored",
        "CREATE TRIGGER forward INSTEAD OF INSERT ON tree BEGIN "
        "INSERT INTO stored VALUES (NEW.level, NEW.idx, NEW.hash); END",
    )
    answer = host.ask("append")
    assert "view tree" in answer.get("refused", ""), answer
    assert count_rows(home, "records") == 8


@pytest.mark.parametrize("by", ["--seq", "--receipt-id"])
def test_chain_prove_names_a_rewritten_record_whose_tree_was_dropped(
    host: LongLivedHost, home: Path, env: dict[str, str], signed: tuple[Path, Path], by: str
) -> None:
    # receipts-and-chain.md: a record rewritten after a checkpoint was signed is named by
    # `chain prove`; a tree is built on first use from the chain's *unchanged* records.
    tamper(home, "DROP TABLE tree", REWRITE_RECORD_2)
    host.prove(3)  # the process's own proof: refused or not, never a crash
    records = _floorctl(env, "chain", "export")
    target = "2" if by == "--seq" else json.loads(records.stdout.splitlines()[2])["receipt_id"]
    _refused_in_words(_floorctl(env, "chain", "prove", by, target))


def test_the_rewritten_record_s_proof_never_verifies_against_the_checkpoint_signed_before(
    host: LongLivedHost, home: Path, env: dict[str, str], signed: tuple[Path, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    tamper(home, "DROP TABLE tree", REWRITE_RECORD_2)
    _refused_in_words(_floorctl(env, "chain", "prove", "--seq", "2", "--checkpoint",
                                str(signed[0])))  # fmt: skip
    proof = _cli_proof(env, 2)
    assert proof is None or not _proof_verifies(proof, signed, env, tmp_path)
    _refused_in_words(_floorctl(env, "chain", "checkpoint", "--signing-key",
                                str(signed[1].with_name("signing.key"))))  # fmt: skip


def test_a_dropped_tree_is_never_rebuilt_over_a_rewritten_record(
    host: LongLivedHost, home: Path, env: dict[str, str]
) -> None:
    # A tree is built from records that hold together (each linked to the one before it,
    # holding the receipt its id names): the rewritten record is named, nothing is written.
    tamper(home, "DROP TABLE tree", REWRITE_RECORD_2)
    answers = [host.ask("append") for _ in range(2)]
    with LongLivedHost(env) as fresh:
        answers.append(fresh.ask("append"))
    assert "refused" in answers[0], answers  # (its connection may find no tree at all)
    named = "record 2's receipt_id is not its receipt's digest"
    assert all(named in answer.get("refused", "") for answer in answers[1:]), answers
    assert count_rows(home, "records") == RECORDS


@pytest.mark.parametrize(
    "view",
    [
        ("ALTER TABLE records RENAME TO kept", "CREATE VIEW records AS SELECT * FROM kept"),
        (
            "ALTER TABLE records RENAME TO kept",
            "CREATE VIEW records AS SELECT * FROM kept",
            "CREATE TRIGGER forward INSTEAD OF INSERT ON records BEGIN INSERT INTO kept VALUES "
            "(NEW.seq, NEW.ts, NEW.chain_id, NEW.event, NEW.receipt_id, NEW.receipt, NEW.prev,"
            " NEW.mac); END",
        ),
    ],
    ids=["a-view", "a-view-forwarding-inserts"],
)
def test_chain_export_of_records_replaced_by_a_view_is_the_records_or_a_refusal(
    host: LongLivedHost, home: Path, env: dict[str, str], view: tuple[str, ...]
) -> None:
    tamper(home, *view)
    answer = host.ask("append")
    assert "view records" in answer.get("refused", ""), answer
    held = count_rows(home, "records")
    exported = _floorctl(env, "chain", "export")
    if exported.returncode != 0:
        _refused_in_words(exported)
        return
    assert len(exported.stdout.splitlines()) == held


@pytest.mark.parametrize(
    "view",
    [
        ("ALTER TABLE records RENAME TO kept", "CREATE VIEW records AS SELECT * FROM kept"),
        (
            "ALTER TABLE records RENAME TO kept",
            "CREATE VIEW records AS SELECT * FROM kept WHERE seq < 7",  # hides the head
        ),
    ],
    ids=["a-view", "a-view-hiding-the-head"],
)
def test_records_replaced_by_a_view_beside_the_process_back_every_proof_or_none(
    scene: Scene, view: tuple[str, ...]
) -> None:
    host, home, env, signed, tmp_path = (
        scene.host, scene.home, scene.env, scene.signed, scene.tmp
    )  # fmt: skip
    tamper(home, *view)
    assert "refused" in host.ask("append")
    _every_proof_handed_out_verifies(host, env, signed, tmp_path)
    _signs_only_what_the_records_make(env, tmp_path, signed[1])


def test_records_and_tree_swapped_by_name_are_refused_in_words_everywhere(
    host: LongLivedHost, home: Path, env: dict[str, str]
) -> None:
    tamper(
        home,
        "ALTER TABLE records RENAME TO swapping",
        "ALTER TABLE tree RENAME TO records",
        "ALTER TABLE swapping RENAME TO tree",
    )
    for command in ("append", "prove 2", "checkpoint"):
        assert "refused" in host.ask(command)
    _refused_in_words(_floorctl(env, "chain", "prove", "--seq", "2"))
    _refused_in_words(_floorctl(env, "chain", "checkpoint"))


def test_a_forged_twin_of_a_record_in_a_records_table_without_its_key_is_named(
    host: LongLivedHost, home: Path, env: dict[str, str], signed: tuple[Path, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    # fleet.md: appends compare roots from the stored tree, so rewritten records pass them
    # and are caught by `chain checkpoint` and the audit; a proof still handed out is of the
    # record the tree holds.
    tamper(
        home,
        *RECORDS_WITHOUT_KEY,
        "INSERT INTO records SELECT seq, ts, chain_id, event, receipt_id, replace(receipt, "
        """'"schema_version":1', '"schema_version":3'), prev, mac FROM records WHERE seq = 3""",
    )
    _every_proof_handed_out_verifies(host, env, signed, tmp_path)
    _checkpoints_after_tampering(env, signed)
    slice_file = tmp_path / "slice.jsonl"
    assert _floorctl(env, "chain", "export", "--out", str(slice_file)).returncode == 0
    verified = _floorctl(env, "verify", "chain", str(slice_file), "--key-file",
                         str(home / "chain.key"), "--json")  # fmt: skip
    report = json.loads(verified.stdout)
    assert not report["proven"] and 3 in {e["seq"] for e in report["integrity_errors"]}


def test_records_deleted_beside_a_process_that_made_proofs_refuse_its_proofs_and_appends(
    host: LongLivedHost, home: Path, env: dict[str, str]
) -> None:
    tamper(home, "DELETE FROM records WHERE seq = 7")  # the head
    assert "holds 8 leaves but the chain only 7" in host.prove(2)["refused"]
    assert "refused" in host.ask("checkpoint")
    _refused_in_words(_floorctl(env, "chain", "prove", "--seq", "2"))
    refused = host.ask("append")
    assert "rollback" in refused.get("refused", ""), refused
    [refusal] = refusals(home)
    assert refusal["event"] == "rollback" and refusal["found"]["size"] == RECORDS - 1


def test_another_home_s_chain_swapped_in_under_a_process_that_made_proofs(
    host: LongLivedHost, home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    other = isolated_env(tmp_path / "other")
    with LongLivedHost(other) as writer:
        writer.appended(5)
    restore_chain(backup_chain(Path(other["FLOORGUARD_HOME"]), tmp_path / "swap"), home)
    # The proof, the append and the checkpoint each witness the chain there: another one
    # than this host saw, refused and recorded each time.
    answer = host.prove(2)
    assert "replaced by another chain" in answer.get("refused", ""), answer
    refused = host.ask("append")
    assert "replaced by another chain" in refused.get("refused", ""), refused
    _refused_in_words(_floorctl(env, "chain", "checkpoint"))
    assert [r["event"] for r in refusals(home)] == ["replaced", "replaced", "replaced"]


@pytest.mark.parametrize(
    "tampering",
    [
        (*TREE_WITHOUT_KEY, "INSERT INTO tree VALUES (1, 1, zeroblob(32))"),
        (*TREE_WITHOUT_KEY, "INSERT INTO tree VALUES (2, 0, zeroblob(32))"),
        (*TREE_WITHOUT_KEY, "INSERT INTO tree VALUES (0, 4, zeroblob(32))"),
        ("UPDATE tree SET hash = zeroblob(32) WHERE level = 1 AND idx = 1",),
        ("DROP TABLE tree", REWRITE_RECORD_2),
        (
            "ALTER TABLE tree RENAME TO stored",
            "CREATE VIEW tree AS SELECT level, idx, zeroblob(32) AS hash FROM stored",
        ),
    ],
    ids=[
        "node-1-1-twice",
        "node-2-0-twice",
        "leaf-4-twice",
        "node-1-1-rewritten",
        "tree-dropped-record-rewritten",
        "a-view-of-zero-hashes",
    ],
)
def test_a_consistency_proof_between_checkpoints_signed_before_is_true_or_refused(
    env: dict[str, str], home: Path, tmp_path: Path, tampering: tuple[str, ...]
) -> None:
    keys = tmp_path / "keys"
    assert _floorctl(env, "keygen", "--out", str(keys)).returncode == 0
    notes = [tmp_path / "c1.txt", tmp_path / "c2.txt"]
    with LongLivedHost(env) as process:
        for note, count in zip(notes, (5, 6), strict=True):
            process.appended(count)
            done = _floorctl(env, "chain", "checkpoint", "--signing-key",
                             str(keys / "signing.key"), "--out", str(note))  # fmt: skip
            assert done.returncode == 0, done.stderr
        tamper(home, *tampering)
        proof = tmp_path / "consistency.json"
        made = _floorctl(env, "chain", "consistency", "--old", str(notes[0]), "--new",
                         str(notes[1]), "--out", str(proof))  # fmt: skip
        if made.returncode != 0:
            _refused_in_words(made)
            return
        verified = _floorctl(env, "verify", "consistency", "--old", str(notes[0]), "--new",
                             str(notes[1]), "--proof", str(proof), "--pubkey",
                             str(keys / "signing.pub"))  # fmt: skip
        assert verified.returncode == 0, verified.stdout + verified.stderr


def _rewrite_path_to_the_root(home: Path) -> bytes:
    """Node (1, 1) (records 2 and 3) rewritten, and (2, 0) and the root (3, 0) above it made
    to agree with it: a tree consistent in itself that no records make. The forged node."""
    forged = b"\x42" * 32

    def interior(left: bytes, right: bytes) -> bytes:
        return hashlib.sha256(b"\x01" + left + right).digest()

    conn = sqlite3.connect(home / "chain.sqlite3", isolation_level=None)
    try:

        def node(level: int, index: int) -> bytes:
            query = "SELECT hash FROM tree WHERE level = ? AND idx = ?"
            return bytes(conn.execute(query, (level, index)).fetchone()[0])

        level_2 = interior(node(1, 0), forged)
        root = interior(level_2, node(2, 1))
        conn.execute("BEGIN IMMEDIATE")
        for level, index, value in ((1, 1, forged), (2, 0, level_2), (3, 0, root)):
            conn.execute(
                "UPDATE tree SET hash = ? WHERE level = ? AND idx = ?", (value, level, index)
            )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return forged


def test_no_proof_is_handed_out_through_nodes_rewritten_up_to_the_root(
    host: LongLivedHost, home: Path, env: dict[str, str], signed: tuple[Path, Path]
) -> None:
    # receipts-and-chain.md: a stored node below a signed checkpoint that the database's
    # owner rewrote: proofs that would need that node fail (so `chain prove` refuses them).
    forged = base64.b64encode(_rewrite_path_to_the_root(home)).decode()
    answer = host.prove(0)
    assert forged not in answer.get("proof", {}).get("hashes", []), answer
    done = _floorctl(env, "chain", "prove", "--seq", "0")
    assert forged not in done.stdout
    _refused_in_words(done)


def test_a_path_rewritten_up_to_the_root_is_refused_by_everything_that_checks_a_root(
    host: LongLivedHost, home: Path, env: dict[str, str], signed: tuple[Path, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    _rewrite_path_to_the_root(home)
    proof = _floorctl(env, "chain", "prove", "--seq", "0")
    _refused_in_words(proof)
    assert "a fork" in proof.stderr
    _refused_in_words(_floorctl(env, "chain", "prove", "--seq", "0", "--checkpoint",
                                str(signed[0])))  # fmt: skip
    key = str(signed[1].with_name("signing.key"))
    _refused_in_words(_floorctl(env, "chain", "checkpoint", "--signing-key", key))
    refused = host.ask("append")
    assert "a fork" in refused.get("refused", ""), refused
    assert [r["event"] for r in refusals(home)] == ["fork", "fork"]  # the proof, the append
