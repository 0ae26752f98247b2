"""A checkpoint after the first verifies only the records appended since the last one this
host signed, and the stored tree against it: what it signs is the same as a verification
from genesis would sign, and every attack on the part it does not re-read (a corrupt node,
a rolled-back or forked tree, a forged or older previous checkpoint) is refused or sends it
back to genesis. In process, on real SQLite chains; the CLI's own handling of the file it
keeps is in test_incremental_checkpoint_cli.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.chain_support import CANARY, execute, filled_chain, receipt
from helpers.tree_support import tree_of_lines

from floorguard._chain.chain import AuditChain
from floorguard._proofs import checkpoint
from floorguard.errors import ChainError, VerificationError

SIGNER = Ed25519PrivateKey.generate()


def _signed(chain: AuditChain, previous: checkpoint.Checkpoint | None = None,
            **extra: object) -> checkpoint.Checkpoint:  # fmt: skip
    """A checkpoint made as `chain checkpoint` makes it, after a round trip through its
    signed note (what the command keeps and reads back)."""
    made = checkpoint.of_chain(chain, previous=previous, **extra)  # type: ignore[arg-type]
    return checkpoint.verify(checkpoint.sign(made, SIGNER).encode(), SIGNER.public_key())


def _append(chain: AuditChain, count: int) -> None:
    for n in range(count):
        chain.append(CANARY, receipt(n=1000 + n))


def _true_root(chain: AuditChain, size: int) -> bytes:
    return tree_of_lines(list(chain.export_lines())[:size]).root()


def _corrupt(chain: AuditChain, level: int, index: int) -> None:
    execute(chain.db_path, "UPDATE tree SET hash = ? WHERE level = ? AND idx = ?",
            b"\x00" * 32, level, index)  # fmt: skip


@pytest.fixture
def chain(tmp_path: Path) -> AuditChain:
    return filled_chain(tmp_path, 11)


def test_an_incremental_checkpoint_signs_what_one_from_genesis_signs(chain: AuditChain) -> None:
    notes: list[str] = []
    chain_id = checkpoint.of_chain(chain).chain_id
    for old in range(1, 12):  # from a checkpoint of every size: edges of every shape
        previous = checkpoint.new_checkpoint(chain_id, old, _true_root(chain, old))
        _append(chain, 1)
        since = checkpoint.of_chain(chain, previous=previous, notify=notes.append)
        again = checkpoint.of_chain(chain)
        assert (since.size, since.root) == (again.size, again.root)
        assert since.root == _true_root(chain, since.size)
    assert notes == []


def test_a_checkpoint_of_an_unchanged_chain_restates_the_last_one(chain: AuditChain) -> None:
    first = _signed(chain)
    second = checkpoint.of_chain(chain, previous=first)
    assert (second.size, second.root) == (first.size, first.root)
    assert second.time is not None


@pytest.mark.parametrize(
    ("level", "index"),
    [(0, 12), (1, 5), (2, 2), (3, 1)],
    ids=["a-new-leaf", "a-node-over-the-old-and-new-leaves", "a-level-2-node", "the-new-top"],
)
def test_a_corrupt_node_between_checkpoints_is_refused(
    chain: AuditChain, level: int, index: int
) -> None:
    previous = _signed(chain)  # 11 records; 5 more make 16: (3, 1) covers leaves 8..15
    _append(chain, 5)
    _corrupt(chain, level, index)
    with pytest.raises(VerificationError, match=rf"node \({level}, {index}\)"):
        checkpoint.of_chain(chain, previous=previous)


@pytest.mark.parametrize(("level", "index"), [(3, 0), (1, 4)], ids=["(3, 0)", "(1, 4)"])
def test_a_corrupt_node_the_old_tree_is_read_through_is_refused(
    chain: AuditChain, level: int, index: int
) -> None:
    previous = _signed(chain)  # 11 = 8 + 2 + 1: its right edge is (3, 0), (1, 4), (0, 10)
    _append(chain, 3)
    _corrupt(chain, level, index)
    with pytest.raises(VerificationError, match="does not hold the tree of the last checkpoint"):
        checkpoint.of_chain(chain, previous=previous)


def test_a_record_altered_after_the_last_checkpoint_is_refused(chain: AuditChain) -> None:
    previous = _signed(chain)
    _append(chain, 4)
    execute(chain.db_path, "UPDATE records SET receipt = replace(receipt, '1002', '1003') "
            "WHERE seq = 13")  # fmt: skip
    with pytest.raises(VerificationError, match="seq 13"):
        checkpoint.of_chain(chain, previous=previous)


def test_the_last_record_signed_is_checked_against_the_signed_root(chain: AuditChain) -> None:
    # The first new record's link is checked against record 10: it must be the signed one.
    previous = _signed(chain)
    _append(chain, 2)
    execute(chain.db_path, "UPDATE records SET receipt = replace(receipt, '\"n\":10', "
            "'\"n\":99') WHERE seq = 10")  # fmt: skip
    with pytest.raises(VerificationError, match="record 10 is not the record the last"):
        checkpoint.of_chain(chain, previous=previous)


def test_a_record_altered_below_the_last_checkpoint_is_not_signed_into_the_tree(
    chain: AuditChain,
) -> None:
    # Not re-read by an incremental checkpoint; what it signs is still the tree the records
    # had when they were verified (the altered record matches no proof), and --full refuses.
    previous = _signed(chain)
    _append(chain, 2)
    honest = _true_root(chain, 13)
    execute(chain.db_path, "UPDATE records SET receipt = replace(receipt, '\"n\":3', "
            "'\"n\":4') WHERE seq = 3")  # fmt: skip
    assert checkpoint.of_chain(chain, previous=previous).root == honest
    with pytest.raises(VerificationError, match="does not verify"):
        checkpoint.of_chain(chain, previous=previous, full=True)


def test_a_chain_rolled_back_below_the_last_checkpoint_is_refused(chain: AuditChain) -> None:
    previous = _signed(chain)
    execute(chain.db_path, "DELETE FROM records WHERE seq >= 7")
    execute(chain.db_path, "DELETE FROM tree WHERE ((idx + 1) << level) > 7")
    for full in (False, True):
        with pytest.raises(VerificationError, match=r"fewer than the 11 .* a rollback"):
            checkpoint.of_chain(chain, previous=previous, full=full)


def test_a_chain_rolled_back_and_appended_to_is_refused_as_a_fork(chain: AuditChain) -> None:
    previous = _signed(chain)
    execute(chain.db_path, "DELETE FROM records WHERE seq >= 7")
    execute(chain.db_path, "DELETE FROM tree WHERE ((idx + 1) << level) > 7")
    _append(chain, 6)  # 13 records, of which 7..12 are not the ones signed
    with pytest.raises(VerificationError, match="does not hold the tree of the last checkpoint"):
        checkpoint.of_chain(chain, previous=previous)
    with pytest.raises(VerificationError, match="forked or rewritten"):
        checkpoint.of_chain(chain, previous=previous, full=True)


def test_an_older_previous_checkpoint_verifies_more_records_and_still_refuses(
    chain: AuditChain,
) -> None:
    older = _signed(chain)
    _append(chain, 3)
    newer = _signed(chain, older)
    assert newer.size == 14
    _append(chain, 2)
    # Someone puts the older checkpoint back and alters a record the newer one covered:
    # starting from the older one, that record is verified again, and refused.
    execute(chain.db_path, "UPDATE records SET receipt = replace(receipt, '1001', '1009') "
            "WHERE seq = 12")  # fmt: skip
    with pytest.raises(VerificationError, match="seq 12"):
        checkpoint.of_chain(chain, previous=older)


def test_a_stray_node_past_the_last_leaf_is_refused(chain: AuditChain) -> None:
    previous = _signed(chain)
    _append(chain, 1)
    execute(chain.db_path, "INSERT INTO tree VALUES (4, 0, ?)", b"\x00" * 32)
    with pytest.raises(VerificationError, match=r"node \(4, 0\), which no record made"):
        checkpoint.of_chain(chain, previous=previous)


def test_a_tree_behind_its_records_is_verified_from_genesis_and_said(chain: AuditChain) -> None:
    previous = _signed(chain)
    _append(chain, 2)
    execute(chain.db_path, "DELETE FROM tree WHERE level = 0 AND idx = 12")
    notes: list[str] = []
    made = checkpoint.of_chain(chain, previous=previous, notify=notes.append)
    assert made.root == _true_root(chain, 13)
    assert notes and "verifying all 13 records" in notes[0]


def test_a_prefix_after_the_last_checkpoint_is_stamped_with_its_record(chain: AuditChain) -> None:
    previous = _signed(chain)
    _append(chain, 4)
    notes: list[str] = []
    since = checkpoint.of_chain(chain, 12, previous=previous, notify=notes.append)
    full = checkpoint.of_chain(chain, 12)
    assert since == full and notes == []
    before = checkpoint.of_chain(chain, 5, previous=previous, notify=notes.append)
    assert before == checkpoint.of_chain(chain, 5)
    assert notes and "precedes the last checkpoint signed" in notes[0]


def test_the_previous_checkpoint_kept_is_used_only_if_this_key_signed_it_for_this_chain(
    chain: AuditChain, tmp_path: Path
) -> None:
    made = checkpoint.of_chain(chain)
    public = checkpoint.raw_public(SIGNER.public_key())
    kept = checkpoint.memory_path(tmp_path / "home", made.chain_id, public)
    assert checkpoint.last_signed(kept, SIGNER.public_key(), made.chain_id) == (None, None)
    checkpoint.remember(kept, checkpoint.sign(made, SIGNER))
    assert kept.stat().st_mode & 0o777 == 0o600
    assert checkpoint.last_signed(kept, SIGNER.public_key(), made.chain_id)[0] == made
    # another key's, a forged size, another chain's: each unused, and why
    other = Ed25519PrivateKey.generate()
    kept.write_text(checkpoint.sign(made, other))
    found, why = checkpoint.last_signed(kept, SIGNER.public_key(), made.chain_id)
    assert found is None and why is not None and "does not verify with this key" in why
    note = checkpoint.sign(made, SIGNER).replace("\n11\n", "\n10\n", 1)
    kept.write_text(note)
    found, why = checkpoint.last_signed(kept, SIGNER.public_key(), made.chain_id)
    assert found is None and why is not None and "signature does not verify" in why
    foreign = checkpoint.new_checkpoint("ab" * 16, 11, made.root)
    kept.write_text(checkpoint.sign(foreign, SIGNER))
    found, why = checkpoint.last_signed(kept, SIGNER.public_key(), made.chain_id)
    assert found is None and why is not None and "another chain" in why
    kept.unlink()
    kept.mkdir()
    found, why = checkpoint.last_signed(kept, SIGNER.public_key(), made.chain_id)
    assert found is None and why is not None and "cannot be read" in why


def test_a_checkpoint_of_another_chain_is_no_starting_point(
    chain: AuditChain, tmp_path: Path
) -> None:
    other = filled_chain(tmp_path / "other", 12)
    foreign = _signed(other)
    notes: list[str] = []
    made = checkpoint.of_chain(chain, previous=foreign, notify=notes.append)
    assert made.root == _true_root(chain, 11)
    assert notes and "not of this one" in notes[0]


def test_reading_the_nodes_of_a_range_and_the_strays_in_sqlite(chain: AuditChain) -> None:
    with chain.tree_snapshot() as snap:
        every = list(snap.nodes())
        for after in range(12):
            for upto in range(after, 12):
                ending = list(snap.nodes_ending(after, upto))
                assert ending == [n for n in every if after < (n[1] + 1) << n[0] <= upto]
        assert snap.stray_node(11) is None
        assert snap.stray_node(10) == (0, 10)
        snap.prefetch([(0, 3), (3, 0), (2, 5), (1, 4)])
        assert [snap.subtree(*key) for key in ((0, 3), (3, 0), (1, 4))] == [
            value for level, index, value in every if (level, index) in {(0, 3), (3, 0), (1, 4)}
        ]
        with pytest.raises(ChainError, match=r"lacks subtree \(2, 5\)"):
            snap.subtree(2, 5)
    with sqlite3.connect(chain.db_path) as conn:
        conn.execute("INSERT INTO tree VALUES (-1, 0, ?)", (b"\x00" * 32,))
    conn.close()
    with chain.tree_snapshot() as snap:
        assert snap.stray_node(11) == (-1, 0)
