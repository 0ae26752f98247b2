"""`floorctl chain checkpoint` keeps the last checkpoint it signed (per chain and key, in
FLOORGUARD_HOME) and starts the next one's verification there, but only once that file's
signature verifies with the key signing now: a forged one sends it back to genesis, said on
stderr; a corrupt node or a chain rolled back below it is refused, and nothing is written.
Real CLI in subprocesses; the chains are made in process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.chain_support import CANARY, execute, filled_chain, receipt
from helpers.tlog_support import ctl
from helpers.tree_support import tree_of_lines

from floorguard._chain.chain import AuditChain
from floorguard._proofs import checkpoint


@pytest.fixture
def root(tmp_path: Path) -> Path:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    (tmp_path / "signing.key").write_bytes(pem)
    (tmp_path / "signing.key").chmod(0o600)
    filled_chain(tmp_path / "state" / "floorguard", 9)
    return tmp_path


def _chain(root: Path) -> AuditChain:
    home = root / "state" / "floorguard"
    return AuditChain(home / "chain.sqlite3", home / "chain.key")


def _sign(root: Path, *extra: str) -> tuple[int, str, checkpoint.Checkpoint | None]:
    out = root / "head.cp"
    out.unlink(missing_ok=True)
    done = ctl(root, "chain", "checkpoint", "--signing-key", "signing.key", "--out", "head.cp",
               *extra)  # fmt: skip
    found = (
        checkpoint.parse_body(checkpoint.split_note(out.read_bytes())[0]) if out.exists() else None
    )
    return done.returncode, done.stderr, found


def _append(root: Path, count: int) -> None:
    chain = _chain(root)
    for n in range(count):
        chain.append(CANARY, receipt(n=500 + n))
    chain.close()


def _kept(root: Path) -> Path:
    (kept,) = (root / "state" / "floorguard" / "checkpoints").iterdir()
    return kept


def _true_root(root: Path) -> bytes:
    return tree_of_lines(list(_chain(root).export_lines())).root()


def test_the_last_checkpoint_is_kept_checked_and_a_forged_one_is_not_used(root: Path) -> None:
    code, stderr, _ = _sign(root)
    assert code == 0, stderr
    assert _kept(root).read_bytes() == (root / "head.cp").read_bytes()
    assert _kept(root).stat().st_mode & 0o777 == 0o600
    _append(root, 3)
    code, stderr, second = _sign(root)
    assert code == 0, stderr
    assert second is not None and second.size == 12 and second.root == _true_root(root)
    assert "verifying" not in stderr  # from the kept checkpoint: nothing to say
    # The kept file replaced by one that claims more and is signed by another key: unused,
    # said, and the whole chain verified instead.
    other = Ed25519PrivateKey.generate()
    forged = checkpoint.new_checkpoint(second.chain_id, 12, b"\x07" * 32)
    _kept(root).write_text(checkpoint.sign(forged, other))
    _append(root, 1)
    code, stderr, third = _sign(root)
    assert code == 0, stderr
    assert "does not verify with this key" in stderr and "from genesis" in stderr
    assert third is not None and third.root == _true_root(root)


def test_a_corrupt_node_since_the_last_checkpoint_is_refused_and_nothing_written(
    root: Path,
) -> None:
    assert _sign(root)[0] == 0
    _append(root, 4)  # 13 records: (2, 2) covers leaves 8..11, 8 of them signed already
    execute(_chain(root).db_path, "UPDATE tree SET hash = ? WHERE level = 2 AND idx = 2",
            b"\x00" * 32)  # fmt: skip
    code, stderr, found = _sign(root)
    assert code == 1 and found is None
    assert "refusing to sign" in stderr and "node (2, 2)" in stderr


@pytest.mark.slow  # (in process: test_incremental_checkpoint.py; this is the command's)
def test_a_chain_restored_from_before_the_last_checkpoint_is_refused(root: Path) -> None:
    db = _chain(root).db_path
    backup = root / "backup.sqlite3"
    with sqlite3.connect(db) as source, sqlite3.connect(backup) as target:
        source.backup(target)
    source.close()
    target.close()
    _append(root, 3)
    assert _sign(root)[0] == 0  # 12 records
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    backup.replace(db)  # 9 records again
    code, stderr, found = _sign(root)
    assert code == 1 and found is None
    # This host saw 12 records: its witness refuses the rollback (and records it) first.
    assert "refusing to sign a checkpoint" in stderr and "rollback" in stderr
    assert "chain view --accept-current" in stderr


@pytest.mark.slow  # (in process: test_incremental_checkpoint.py; this is the flag's)
def test_full_verifies_what_an_incremental_checkpoint_does_not_reread(root: Path) -> None:
    assert _sign(root)[0] == 0
    honest = _true_root(root)
    execute(_chain(root).db_path, "UPDATE records SET receipt = replace(receipt, "
            "'\"n\":2', '\"n\":3') WHERE seq = 2")  # fmt: skip
    code, stderr, found = _sign(root)
    assert code == 0, stderr
    assert found is not None and found.root == honest  # the tree of the records as verified
    code, stderr, found = _sign(root, "--full")
    assert code == 1 and found is None
    assert "does not verify" in stderr and "seq 2" in stderr


def test_a_kept_place_that_cannot_hold_the_checkpoint_is_said_and_the_chain_still_signed(
    root: Path,
) -> None:
    # A file where the folder of kept checkpoints belongs: nothing can be read or kept
    # there, which is said in words; the chain is verified from genesis and signed.
    folder = root / "state" / "floorguard" / "checkpoints"
    folder.write_text("not a folder\n")
    code, stderr, found = _sign(root)
    assert code == 0, stderr
    assert found is not None and found.size == 9 and found.root == _true_root(root)
    assert "from genesis" in stderr and "could not keep this checkpoint" in stderr
    assert "not a folder" in stderr, stderr
    assert folder.read_text() == "not a folder\n"
    # A kept file too large to be a checkpoint is named once, in plain words.
    folder.unlink()
    assert _sign(root)[0] == 0
    _kept(root).write_bytes(b"x" * (65 * 1024))
    code, stderr, found = _sign(root)
    assert code == 0 and found is not None, stderr
    assert "the last checkpoint signed is larger than 64 KiB" in stderr
    assert "the the" not in stderr


def test_accept_current_names_what_it_refuses_on_a_chain_that_does_not_verify(
    root: Path,
) -> None:
    # The host is asked to adopt the chain, not to sign a checkpoint: the refusal says so,
    # and still names the record that does not verify.
    execute(_chain(root).db_path, "UPDATE records SET mac = replace(mac, substr(mac, 1, 1), "
            "CASE substr(mac, 1, 1) WHEN 'a' THEN 'b' ELSE 'a' END) WHERE seq = 4")  # fmt: skip
    done = ctl(root, "chain", "view", "--accept-current")
    assert done.returncode == 1, done
    assert "cannot accept the chain as it is" in done.stderr, done.stderr
    assert "seq 4" in done.stderr, done.stderr
