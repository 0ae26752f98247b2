"""What a proof reads from a shared chain, in as few round trips as it can: the snapshot's
extent, the path's nodes and the record with its BEGIN. Read together, they must be what
the same reads made apart return; the kept session must hold no snapshot or lock between
reads; and a chain whose tables are gone must read as before: empty when the records are
gone, refused in words when only the tree is."""

from __future__ import annotations

import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import CANARY, Chain

from floorguard._crypto import merkle
from floorguard._proofs import checkpoint, tlog
from floorguard.chainstore.interface import FirstReads
from floorguard.errors import ChainError, VerificationError

pytestmark = pytest.mark.fleet


def test_the_nodes_and_the_record_read_together_are_those_read_apart(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(5):
        chain.append(CANARY, receipt(n=n))
    keys = [(0, 3), (1, 0), (2, 1), (0, 9), (1, 0)]  # (0, 9) is no node; (1, 0) twice
    with chain.store.read() as view:
        assert view is not None
        nodes, row = view.subtrees_and_row(keys, 3)
        assert nodes == view.subtrees(keys) and set(nodes) == {(0, 3), (1, 0)}
        assert row == view.row(3) and row is not None and row[0] == 3
        assert view.subtrees_and_row([], 4) == ({}, view.row(4))
        # No record at either end, nor beyond what a bigint holds.
        assert view.subtrees_and_row([(0, 1)], -1)[1] is None
        assert view.subtrees_and_row([], 5)[1] is None
        assert view.subtrees_and_row([], 2**63) == ({}, None)


def test_what_a_read_reads_as_it_begins_is_what_it_would_read_after(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(6):
        chain.append(CANARY, receipt(n=n))
    keys = [(0, 3), (1, 0), (2, 1), (0, 9), (1, 0)]
    for seq in (0, 3, 5, 6, -1, 2**63):  # 6: no record yet; then none there can be
        first = FirstReads(keys, seq)
        with chain.store.read(first) as ahead, chain.store.read() as asked:
            assert ahead is not None and asked is not None
            assert ahead.extent() == asked.extent()
            assert ahead.subtrees_and_row(keys, seq) == asked.subtrees_and_row(keys, seq)
            assert ahead.row(seq) == asked.row(seq)
    with chain.store.read(FirstReads()) as view:
        assert view is not None and view.extent()[:2] == (6, 6)


def test_a_read_s_first_reads_refuse_what_is_not_an_integer(pg: Chain) -> None:
    # Written into the read's first message ("%d"): anything else is refused unsent.
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    injected = [(0, "0}'::bigint[]) AS w (l, i); DROP TABLE floorguard.records; --")]
    with pytest.raises(TypeError), chain.store.read(FirstReads(injected, 0)):  # type: ignore[arg-type]
        pass
    assert chain.head() is not None


def _sessions(pg: Chain) -> list[str]:
    query = (
        "SELECT coalesce(state, '') || ':' || coalesce(backend_xmin::text, '') FROM"
        " pg_stat_activity WHERE usename = '{}' AND pid <> pg_backend_pid()"
    )
    states = pg.server.psql(query.format(pg.appender))
    return [line.strip() for line in states.splitlines() if line.strip()]


def test_the_kept_read_session_holds_no_snapshot_and_no_lock_between_reads(pg: Chain) -> None:
    """A snapshot held would stop vacuum, and a lock held would queue the owner's DDL and
    every append behind it (fleet.md): a read's snapshot ends with it, first reads or not."""
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    for _ in range(3):
        with chain.tree_snapshot(FirstReads([(0, 0)], 0)) as snap:
            assert snap.size == 1
        # (the appender's session and the kept reader's)
        assert _sessions(pg) == ["idle:", "idle:"]
        pg.sql("BEGIN; SET LOCAL lock_timeout = '1s';"
               " LOCK TABLE floorguard.meta, floorguard.records, floorguard.tree"
               " IN ACCESS EXCLUSIVE MODE; COMMIT")  # fmt: skip


def test_proofs_made_on_the_kept_session_verify_against_a_signed_root(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(11):
        chain.append(CANARY, receipt(n=n))
    with chain.tree_snapshot() as snap:
        cp = checkpoint.new_checkpoint(
            snap.chain_id() or "", snap.size, merkle.root(snap.size, snap.subtree)
        )
    for seq in range(11):
        proof = tlog.prove_inclusion(chain, seq=seq, checkpoint=cp)
        leaf = merkle.leaf_hash(proof.record.encode("utf-8"))
        merkle.verify_inclusion(seq, cp.size, leaf, list(proof.hashes), cp.root)
        assert tlog.prove_inclusion(chain, seq=seq).hashes == proof.hashes


def test_a_snapshot_of_a_chain_whose_tables_were_dropped_is_refused(pg: Chain) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    with chain.tree_snapshot() as snap:  # (its session is kept for the next read)
        assert snap.size == 1
    pg.sql("DROP TABLE floorguard.tree")
    refused = pytest.raises(ChainError, match=r"cannot read the audit chain .*floorguard\.tree")
    with refused, chain.tree_snapshot():
        pass
    assert all(state == "idle:" for state in _sessions(pg))  # (no aborted snapshot left)
    assert chain.head().seq == 0  # type: ignore[union-attr]
    pg.sql("DROP TABLE floorguard.records CASCADE")
    # Its functions are still there: a chain whose records are gone is not an empty one.
    for _ in range(2):  # the failed read's transaction does not outlive it
        refused = pytest.raises(ChainError, match=r"cannot read .*floorguard\.records")
        with refused, chain.tree_snapshot():
            pass
        with pytest.raises(ChainError, match=r"floorguard\.records"):
            chain.head()
        states = _sessions(pg)
        assert all(state == "idle:" for state in states), states


# The owner has first_seq_of name record 0 for any receipt.
FIRST_SEQ_ALWAYS_0 = """
BEGIN;
CREATE SCHEMA aside;
ALTER FUNCTION floorguard_api.first_seq_of(text) SET SCHEMA aside;
CREATE FUNCTION floorguard_api.first_seq_of(wanted text) RETURNS bigint LANGUAGE sql
  SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS 'SELECT 0::bigint';
GRANT EXECUTE ON FUNCTION floorguard_api.first_seq_of(text) TO floorguard_appender_{db};
COMMIT;
"""


def test_a_proof_asked_by_receipt_id_is_of_the_record_holding_that_receipt(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    wanted = chain.head()
    assert wanted is not None and wanted.seq == 2
    assert tlog.prove_inclusion(chain, receipt_id=wanted.receipt_id).leaf_index == 2
    pg.sql(FIRST_SEQ_ALWAYS_0.format(db=pg.database))
    with pytest.raises(VerificationError, match="holds receipt"):
        tlog.prove_inclusion(chain, receipt_id=wanted.receipt_id)
