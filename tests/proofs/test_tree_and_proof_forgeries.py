"""The chain's stored Merkle tree and the proofs made from it, under forgery: a tree larger
than the chain, stored nodes that are not 32-byte hashes or planted for the next record,
and proof inputs that are not canonical, of another type, too deep or beyond the tree are
refused in words by ``floorctl chain prove`` / ``chain consistency`` and both ``verify``
CLIs. Real CLIs in subprocesses, real databases."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import isolated_env
from helpers.tlog_support import ctl, guard, ok

from floorguard._crypto import merkle

pytestmark = pytest.mark.attack

CODE = (
    "import floorguard, sys\n"
    "for version in sys.argv[1:]:\n"
    "    try:\n"
    "        floorguard.preflight('aider', version=version)\n"
    "    except floorguard.SpawnRefused as exc:\n"
    "        print(exc)\n"
)


def preflights(root: Path, *versions: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CODE, *versions], cwd=root, env=isolated_env(root / "state"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def db(root: Path) -> Path:
    return root / "state" / "floorguard" / "chain.sqlite3"


def execute(path: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)
    conn.close()


def stored(path: Path, level: int, index: int) -> bytes:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT hash FROM tree WHERE level = ? AND idx = ?", (level, index)
        ).fetchone()
    conn.close()
    return bytes(row[0])


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """Seven real preflight records and a signed checkpoint of them (cp7), with an inclusion
    proof of record 3 (p3)."""
    ok(ctl(tmp_path, "keygen", "--out", "keys"))
    ok(preflights(tmp_path, "0.60.0", "0.59.0", "0.61.3", "0.62.0", "0.58.0", "0.63.0", "0.64.0"))
    ok(ctl(tmp_path, "chain", "checkpoint", "--signing-key", "keys/signing.key", "--out", "cp7"))
    ok(ctl(tmp_path, "chain", "prove", "--seq", "3", "--checkpoint", "cp7", "--out", "p3"))
    return tmp_path


def forge_leaf_seven(path: Path) -> None:
    """A leaf for record 7, which does not exist, with the subtrees over it: a tree of 8
    leaves that holds together by itself."""
    fake = hashlib.sha256(b"a record that was never appended").digest()
    n13 = merkle.node_hash(stored(path, 0, 6), fake)
    n21 = merkle.node_hash(stored(path, 1, 2), n13)
    n30 = merkle.node_hash(stored(path, 2, 0), n21)
    for level, index, value in ((0, 7, fake), (1, 3, n13), (2, 1, n21), (3, 0, n30)):
        execute(path, "INSERT INTO tree (level, idx, hash) VALUES (?, ?, ?)", level, index, value)


def _record_variants(line: str) -> dict[str, str]:
    record = json.loads(line)
    reordered = json.dumps(dict(reversed(list(record.items()))), separators=(",", ":"))
    return {
        "spaced": json.dumps(record),
        "reordered keys": reordered,
        "duplicate seq": line[:-1] + ',"seq":4}',
        "escaped ascii": line.replace('"event":"adapter', '"event":"\\u0061dapter'),
    }


@pytest.mark.parametrize("alteration", ["leaf beyond the records", "records deleted"])
@pytest.mark.parametrize("command", ["prove", "consistency"])
def test_a_tree_larger_than_the_chain_yields_no_proof_of_records_it_does_not_hold(
    log: Path, alteration: str, command: str
) -> None:
    # Broke: the head size was the stored tree's, so `chain prove` wrote a proof for a
    # tree of 8 records (and `chain consistency` one from 7 to 8) of a 7-record chain.
    if alteration == "leaf beyond the records":
        forge_leaf_seven(db(log))
    else:
        execute(db(log), "DELETE FROM records WHERE seq >= 5")
    args = ["prove", "--seq", "3"] if command == "prove" else ["consistency", "--old", "cp7"]
    done = ctl(log, "chain", *args)
    assert done.returncode == 1, done.stdout
    assert done.stdout == ""
    held = (8, 7) if alteration == "leaf beyond the records" else (7, 5)
    assert done.stderr == (
        f"floorctl: error: the stored Merkle tree of {db(log)} holds {held[0]} leaves but the "
        f"chain only {held[1]} records (records were deleted or the tree was altered): no "
        "proof was written\n"
    )


@pytest.mark.parametrize("value", ["text", b"short"], ids=["text", "5 bytes"])
def test_an_append_never_hashes_a_stored_subtree_that_is_not_a_32_byte_hash(
    log: Path, value: object
) -> None:
    # Broke: a text hash made the preflight die with a TypeError traceback; a 5-byte one was
    # hashed into new subtrees (the append went through on an altered tree).
    execute(db(log), "UPDATE tree SET hash = ? WHERE level = 0 AND idx = 6", value)
    done = ok(preflights(log, "0.61.0"))
    assert "Traceback" not in done.stderr
    assert done.stdout == (
        "refusing to spawn aider: the decision (permit) could not be recorded in the audit "
        f"chain: cannot append to the audit chain {db(log)}: the Merkle tree lacks subtree "
        "(0, 6) (the database was altered)\n"
    )
    with sqlite3.connect(db(log)) as conn:
        assert conn.execute(
            "SELECT max(seq), (SELECT max(idx) FROM tree) FROM records"
        ).fetchone() == (6, 6)
    conn.close()


@pytest.mark.parametrize("variant", ["spaced", "reordered keys", "duplicate seq", "escaped ascii"])
def test_an_equivalent_but_not_canonical_record_line_is_refused_by_both_verifiers(
    log: Path, variant: str
) -> None:
    # Held: the leaf is the exact bytes, and only the canonical line (the one whose parse
    # is reported) is accepted, so what is reported is what was hashed.
    proof = json.loads((log / "p3").read_text())
    proof["record"] = _record_variants(proof["record"])[variant]
    (log / "px").write_text(json.dumps(proof))
    args = ("verify", "inclusion", "px", "--checkpoint", "cp7", "--pubkey", "keys/signing.pub")
    ours, theirs = ctl(log, *args), guard(log, *args)
    assert (ours.returncode, theirs.returncode) == (1, 1)
    assert ours.stderr == "floorctl: error: px: the record is not a canonical export line\n"
    assert theirs.stderr == "floorguard: error: px: the record is not a canonical export line\n"


@pytest.mark.parametrize("field", ["leaf_index", "tree_size"])
@pytest.mark.parametrize("value", [True, 3.0, "3", -1, None], ids=repr)
def test_a_proof_number_of_another_type_is_refused_not_coerced(
    log: Path, field: str, value: object
) -> None:
    proof = json.loads((log / "p3").read_text())
    proof[field] = value
    (log / "px").write_text(json.dumps(proof))
    minimum = 0 if field == "leaf_index" else 1
    args = ("verify", "inclusion", "px", "--checkpoint", "cp7", "--pubkey", "keys/signing.pub")
    for tool, run in (("floorctl", ctl), ("floorguard", guard)):
        done = run(log, *args)
        assert done.returncode == 1
        assert done.stderr == (
            f"{tool}: error: px: inclusion proof: {field} is not an integer of at least {minimum}\n"
        )


@pytest.mark.parametrize("seq", ["7", str(2**63 - 1), str(2**66)])
def test_a_seq_beyond_the_tree_is_refused_in_words_however_large(log: Path, seq: str) -> None:
    # Broke: a seq beyond SQLite's 64-bit integers died with an OverflowError traceback.
    done = ctl(log, "chain", "prove", "--seq", seq)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"floorctl: error: the tree of 7 records has no record {seq}\n"


@pytest.mark.parametrize("depth", [201, 985, 5000])
def test_a_deeply_nested_record_is_refused_alike_by_both_verifiers(log: Path, depth: int) -> None:
    # Broke: at depth 985 `python -m floorguard verify inclusion` died with a RecursionError
    # traceback while floorctl said "not JSON": the outcome hung on each CLI's stack depth.
    proof = json.loads((log / "p3").read_text())
    assert '"waiver_id":null}' in proof["record"]
    deep = "[" * depth + "]" * depth
    proof["record"] = proof["record"].replace(
        '"waiver_id":null}', f'"waiver_id":null,"zz":{deep}}}'
    )
    (log / "px").write_text(json.dumps(proof))
    args = ("verify", "inclusion", "px", "--checkpoint", "cp7", "--pubkey", "keys/signing.pub")
    for tool, run in (("floorctl", ctl), ("floorguard", guard)):
        done = run(log, *args)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"{tool}: error: px: the record nests deeper than 200 levels\n"


def test_a_deeply_nested_proof_document_is_refused_alike_by_both_verifiers(log: Path) -> None:
    proof = json.loads((log / "p3").read_text())
    text = json.dumps(proof).replace('"hashes": [', '"hashes": [' + "[" * 985 + "]" * 985 + ",")
    (log / "px").write_text(text)
    args = ("verify", "inclusion", "px", "--checkpoint", "cp7", "--pubkey", "keys/signing.pub")
    for tool, run in (("floorctl", ctl), ("floorguard", guard)):
        done = run(log, *args)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == (f"{tool}: error: px: inclusion proof nests deeper than 200 levels\n")


def test_a_record_at_the_nesting_bound_is_still_read(log: Path) -> None:
    # 198 arrays inside the receipt, which sits at depth 2: exactly 200 levels, read and
    # then refused only because it is not the leaf the log holds.
    proof = json.loads((log / "p3").read_text())
    deep = "[" * 198 + "]" * 198
    proof["record"] = proof["record"].replace(
        '"waiver_id":null}', f'"waiver_id":null,"zz":{deep}}}'
    )
    (log / "px").write_text(json.dumps(proof))
    done = guard(
        log, "verify", "inclusion", "px", "--checkpoint", "cp7", "--pubkey", "keys/signing.pub"
    )
    assert done.returncode == 1
    assert "does not lead to the tree's root" in done.stderr


def test_building_the_tree_of_an_old_chain_with_a_record_missing_names_the_database(
    log: Path,
) -> None:
    # Broke: "floorctl: error: the audit chain has no record 3", naming no file.
    execute(db(log), "DROP TABLE tree")
    execute(db(log), "DELETE FROM records WHERE seq = 3")
    done = ctl(log, "chain", "prove", "--seq", "1")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"floorctl: error: cannot build the Merkle tree of the audit chain {db(log)}: the audit "
        "chain has no record 3 (the database was altered)\n"
    )


def test_an_append_onto_a_tree_row_planted_for_the_next_record_is_refused_in_words(
    log: Path,
) -> None:
    # Was: "... : UNIQUE constraint failed: tree.level, tree.idx" (refused, but unexplained).
    forge_leaf_seven(db(log))
    done = ok(preflights(log, "0.61.0"))
    assert done.stdout == (
        "refusing to spawn aider: the decision (permit) could not be recorded in the audit "
        f"chain: cannot append to the audit chain {db(log)}: the Merkle tree holds subtrees of "
        "records not yet appended (the database was altered)\n"
    )


def test_a_stored_leaf_altered_is_not_called_an_altered_record(log: Path) -> None:
    # The record's line and its stored leaf disagree: either may have been altered, and
    # `verify chain` (the records alone) tells which. Was: "the record was altered".
    execute(db(log), "UPDATE tree SET hash = ? WHERE level = 0 AND idx = 0", b"\x33" * 32)
    done = ctl(log, "chain", "prove", "--seq", "0")
    assert (done.returncode, done.stdout) == (1, "")
    assert "record 0 or the leaf the stored tree holds for it was altered" in done.stderr


def test_a_node_altered_below_the_last_checkpoint_is_named_as_the_trees(tmp_path: Path) -> None:
    # Record 3's path to the root of the checkpoint of 4 records reads (0, 2) and (1, 0),
    # below the one node the next checkpoint checks first, (2, 0). Was: "record 3 is not
    # the record the last checkpoint signed holds (it was altered after it was signed)".
    ok(ctl(tmp_path, "keygen", "--out", "keys"))
    ok(preflights(tmp_path, "0.60.0", "0.59.0", "0.61.3", "0.62.0"))
    ok(ctl(tmp_path, "chain", "checkpoint", "--signing-key", "keys/signing.key", "--out", "cp4"))
    ok(preflights(tmp_path, "0.58.0", "0.63.0"))
    execute(db(tmp_path), "UPDATE tree SET hash = ? WHERE level = 1 AND idx = 0", b"\x33" * 32)
    done = ctl(tmp_path, "chain", "checkpoint", "--signing-key", "keys/signing.key")
    assert (done.returncode, done.stdout) == (1, "")
    assert "altered after it was signed" not in done.stderr, done.stderr
    assert "the tree was rewritten below that root" in done.stderr, done.stderr
