"""The audit chain keeps an RFC 6962 Merkle tree of its records, built for old chains on
first use without touching a record."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from helpers.chain_support import CANARY, execute, filled_chain, receipt
from helpers.tree_support import assert_tree_matches_records, tree_of_lines

from floorguard._chain.chain import AuditChain
from floorguard._crypto import merkle
from floorguard.chainstore import sqlite as sqlite_store
from floorguard.errors import ChainError, ChainWriteError


def _as_old_chain(db: Path) -> None:
    """What the code before the tree left: the same records and no tree table."""
    execute(db, "DROP TABLE tree")


def _file_digest(chain: AuditChain) -> str:
    return hashlib.sha256("\n".join(chain.export_lines()).encode()).hexdigest()


def test_every_append_adds_its_leaf_and_the_root_is_the_tree_over_the_export_lines(
    tmp_path: Path,
) -> None:
    chain = filled_chain(tmp_path, 37)
    assert assert_tree_matches_records(chain) == 37
    # Leaf input is the export line, mac included: RFC 6962 leaf hash of its bytes.
    line = next(iter(chain.export_lines()))
    with chain.tree_snapshot() as snap:
        assert snap.subtree(0, 0) == hashlib.sha256(b"\x00" + line.encode()).digest()


def test_an_old_chain_gets_its_tree_at_the_next_append_and_keeps_its_records(
    tmp_path: Path,
) -> None:
    chain = filled_chain(tmp_path, 21)
    before = list(chain.export_lines())
    chain.close()
    _as_old_chain(chain.db_path)
    with chain.tree_snapshot() as snap:
        assert (snap.size, snap.records) == (0, 21)
    again = AuditChain(chain.db_path, chain.key_file)
    again.append(CANARY, receipt(n=21))
    after = list(again.export_lines())
    assert after[:21] == before  # not one record rewritten
    assert assert_tree_matches_records(again) == 22


def test_ensure_tree_builds_the_tree_of_an_old_chain_without_appending(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 1000)
    digest = _file_digest(chain)
    root = tree_of_lines(list(chain.export_lines())).root()
    chain.close()
    _as_old_chain(chain.db_path)
    reopened = AuditChain(chain.db_path, chain.key_file)
    assert reopened.ensure_tree() == 1000
    assert _file_digest(reopened) == digest
    with reopened.tree_snapshot() as snap:
        assert merkle.root(snap.size, snap.subtree) == root
    assert reopened.ensure_tree() == 1000  # idempotent


def test_records_appended_by_an_old_writer_are_added_to_the_tree_later(tmp_path: Path) -> None:
    # An old floorguard appends rows without tree rows; the next new append catches up.
    chain = filled_chain(tmp_path, 10)
    chain.close()
    execute(
        chain.db_path, "DELETE FROM tree WHERE level > 0 AND idx * (1 << level) + (1 << level) > 6"
    )
    execute(chain.db_path, "DELETE FROM tree WHERE level = 0 AND idx >= 6")
    again = AuditChain(chain.db_path, chain.key_file)
    again.append(CANARY, receipt(n=10))
    assert assert_tree_matches_records(again) == 11


def test_ensure_tree_never_creates_a_database(tmp_path: Path) -> None:
    chain = AuditChain(tmp_path / "none" / "chain.sqlite3", tmp_path / "none" / "chain.key")
    assert chain.ensure_tree() == 0
    assert not (tmp_path / "none").exists()


def test_a_missing_subtree_is_reported_not_guessed(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 8)
    chain.close()
    execute(chain.db_path, "DELETE FROM tree WHERE level = 3")
    with chain.tree_snapshot() as snap, pytest.raises(ChainError, match=r"lacks subtree \(3, 0\)"):
        merkle.root(8, snap.subtree)


def test_an_append_to_a_chain_whose_tree_was_cut_is_refused_by_name(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 7)
    chain.close()
    execute(chain.db_path, "DELETE FROM tree WHERE level = 1 AND idx = 2")
    again = AuditChain(chain.db_path, chain.key_file)
    with pytest.raises(ChainWriteError, match=r"chain\.sqlite3: the Merkle tree lacks subtree"):
        again.append(CANARY, receipt(n=7))


def test_stored_subtrees_are_read_in_one_query_by_the_trees_key_never_by_a_scan(
    tmp_path: Path,
) -> None:
    chain = filled_chain(tmp_path, 300)
    with chain.tree_snapshot() as snap:
        one_by_one = {(0, i): snap.subtree(0, i) for i in range(300)}
        one_by_one |= {(1, i): snap.subtree(1, i) for i in range(150)}
    # More pairs than one statement takes, a pair asked twice, and pairs the tree lacks.
    wanted = [*one_by_one, (0, 7), (0, 300), (9, 1), (-1, 0)]
    with chain.store.read() as view:
        assert view is not None
        assert view.subtrees(wanted) == one_by_one
        plan = [
            row[3]
            for row in view._conn.execute(  # type: ignore[attr-defined]
                "EXPLAIN QUERY PLAN " + sqlite_store._subtrees_query(3), [0, 1, 0, 2, 1, 0]
            )
        ]
    assert any(step.startswith("SEARCH tree USING PRIMARY KEY") for step in plan), plan
    assert not any(step.startswith("SCAN tree") for step in plan), plan


@pytest.mark.parametrize(
    "shape",
    [
        "CREATE TABLE tree (level, idx, hash)",
        "CREATE TABLE tree (level TEXT, idx TEXT, hash BLOB)",
        "CREATE TABLE tree (level REAL, idx REAL, hash)",
        "CREATE TABLE stored (level, idx, hash); CREATE VIEW tree AS SELECT * FROM stored",
    ],
    ids=["no key or types", "text columns", "real columns", "a view"],
)
def test_node_reads_answer_as_one_lookup_a_pair_would_whatever_a_forged_tree_table_holds(
    shape: str,
) -> None:
    # A tree table someone replaced: no key (so repeated pairs), other column types, a view;
    # numbers spelled as text or reals, hashes that are no BLOB. The statement that reads
    # many pairs at once must find what one lookup per pair, in order, finds (NULL for a
    # pair it lacks, every hash of a pair stored more than once).
    conn = sqlite3.connect(":memory:")
    conn.executescript(shape)
    table = "stored" if "VIEW" in shape else "tree"
    spellings = [0, 5, "5", 5.0, " 5", b"\x05", None, -1]
    hashes = [b"x" * 32, b"short", "text", None, 3]
    for n in range(300):
        row = (spellings[n % 8], spellings[(n // 8) % 8], hashes[n % 5])
        conn.execute(f"INSERT INTO {table} VALUES (?, ?, ?)", row)  # noqa: S608
    one = "SELECT hash FROM tree WHERE level = ? AND idx = ?"
    for size in (1, 7, 30):
        pairs = [(a, b) for a in (0, 5, -1) for b in (0, 5, -1, 2**63 - 1)][:size]
        params = [value for pair in pairs for value in pair]
        together = conn.execute(sqlite_store._subtrees_query(len(pairs)), params).fetchall()
        alone = [row for pair in pairs for row in (conn.execute(one, pair).fetchall() or [(None,)])]
        assert together == alone


def test_a_tree_holding_a_pair_twice_is_refused_by_the_read_of_many_pairs(
    tmp_path: Path,
) -> None:
    chain = filled_chain(tmp_path, 8)
    # The key dropped (the table rebuilt without it) and node (1, 2) stored a second time.
    for statement in (
        "CREATE TABLE loose (level, idx, hash)",
        "INSERT INTO loose SELECT level, idx, hash FROM tree",
        "INSERT INTO loose SELECT level, idx, zeroblob(32) FROM tree WHERE level = 1 AND idx = 2",
        "DROP TABLE tree",
        "ALTER TABLE loose RENAME TO tree",
    ):
        execute(chain.db_path, statement)
    with chain.store.read() as view:
        assert view is not None
        assert view.subtrees([(0, 1)]) != {}
        with pytest.raises(ChainError, match="a row too many or few"):
            view.subtrees([(0, 1), (1, 2), (2, 0)])


@pytest.mark.parametrize(
    ("rewrite", "named"),
    [
        (
            """UPDATE records SET receipt = replace(receipt, '"n":3', '"n":4') WHERE seq = 3""",
            "record 3's receipt_id is not its receipt's digest",
        ),
        (
            "UPDATE records SET prev = 'sha256:' || printf('%064d', 0) WHERE seq = 5",
            "record 5's prev is not the digest of the record before it",
        ),
        ("UPDATE records SET ts = x'37' WHERE seq = 6", "record 6 holds a value that is not text"),
    ],
    ids=["receipt", "link", "type"],
)
def test_a_tree_is_never_built_over_a_record_that_does_not_hold_together(
    tmp_path: Path, rewrite: str, named: str
) -> None:
    chain = filled_chain(tmp_path, 9)
    chain.close()
    execute(chain.db_path, "DROP TABLE tree")
    execute(chain.db_path, rewrite)
    again = AuditChain(chain.db_path, chain.key_file)
    with pytest.raises(ChainWriteError, match=named):
        again.ensure_tree()
    with sqlite3.connect(chain.db_path) as db:
        assert db.execute("SELECT count(*) FROM tree").fetchone()[0] == 0
