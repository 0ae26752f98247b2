"""A checkpoint of the shared chain is signed only when every node of the tree the database
stores is the node its records make: proofs are served from those nodes, so a corrupt one
below the root would make a signed checkpoint back wrong proofs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.grown_chain import grow_postgres
from helpers.pg_chain import CANARY, Chain, floorctl
from helpers.tree_support import tree_of_lines

from floorguard._chain.chain_key import load_key
from floorguard._crypto import merkle
from floorguard._proofs import checkpoint, tlog
from floorguard.chainstore.interface import stray_query
from floorguard.errors import VerificationError


def _checkpoint(pg: Chain, folder: Path) -> tuple[int, str]:
    key = folder / "keys" / "signing.key"
    assert floorctl("keygen", "--out", str(key.parent), env=pg.env(folder)).returncode == 0
    done = floorctl("chain", "checkpoint", "--signing-key", str(key), "--out",
                    str(folder / "head.cp"), env=pg.env(folder))  # fmt: skip
    return done.returncode, done.stderr


def _filled(pg: Chain, count: int) -> None:
    chain = pg.chain()
    for n in range(count):
        chain.append(CANARY, receipt(n=n))
    chain.close()


@pytest.mark.parametrize(
    ("level", "index"),
    [(0, 2), (1, 0), (2, 1)],
    ids=["a-leaf-under-a-stored-parent", "an-inner-node", "a-level-2-node"],
)
def test_a_corrupt_node_below_the_root_refuses_the_checkpoint(
    pg: Chain, tmp_path: Path, level: int, index: int
) -> None:
    _filled(pg, 13)  # the root hashes (3, 0), (2, 2) and (0, 12) only
    zero = "\\x" + "00" * 32
    tamper = f"SET hash = '{zero}' WHERE level = {level} AND idx = {index}"
    pg.sql(f"ALTER TABLE floorguard.tree DISABLE TRIGGER USER; UPDATE floorguard.tree {tamper}")
    code, stderr = _checkpoint(pg, tmp_path)
    assert code != 0
    assert f"node ({level}, {index})" in stderr and "does not match its records" in stderr
    assert not (tmp_path / "head.cp").exists()


@pytest.mark.parametrize(
    "row",
    ["(1, 6)", "(-1, 0)", "(1, 9223372036854775807)", "(62, 0)"],
    ids=["past-the-last-leaf", "a-negative-level", "an-index-that-overflows", "level-62"],
)
def test_a_node_that_no_record_made_refuses_the_checkpoint(
    pg: Chain, tmp_path: Path, row: str
) -> None:
    _filled(pg, 13)
    pg.sql(f"INSERT INTO floorguard.tree VALUES {row[:-1]}, '\\x{'00' * 32}')")  # noqa: S608
    code, stderr = _checkpoint(pg, tmp_path)
    assert code != 0
    assert "which no record made" in stderr
    assert not (tmp_path / "head.cp").exists()


def test_an_intact_tree_is_signed(pg: Chain, tmp_path: Path) -> None:
    _filled(pg, 13)
    code, stderr = _checkpoint(pg, tmp_path)
    assert code == 0, stderr
    assert (tmp_path / "head.cp").read_text().splitlines()[1] == "13"


def test_a_checkpoint_since_the_last_one_and_proofs_read_the_shared_tree(pg: Chain) -> None:
    # The queries the incremental checkpoint and the proofs make, against the server.
    _filled(pg, 13)
    chain = pg.chain()
    first = checkpoint.of_chain(chain)
    for n in range(6):
        chain.append(CANARY, receipt(n=100 + n))
    since = checkpoint.of_chain(chain, previous=first)
    full = checkpoint.of_chain(chain, previous=first, full=True)
    assert (
        (since.size, since.root)
        == (full.size, full.root)
        == (19, tree_of_lines(list(chain.export_lines())).root())
    )
    with chain.tree_snapshot() as snap:
        every = list(snap.nodes())
        assert (snap.records, snap.size, snap.chain_id()) == (19, 19, first.chain_id)
        for after, upto in ((0, 19), (13, 19), (12, 16), (18, 19), (19, 19)):
            assert list(snap.nodes_ending(after, upto)) == [
                node for node in every if after < (node[1] + 1) << node[0] <= upto
            ]
        assert snap.stray_node(19) is None and snap.stray_node(18) == (0, 18)
    for seq in (0, 12, 18):
        proof = tlog.prove_inclusion(chain, seq=seq, checkpoint=since)
        merkle.verify_inclusion(seq, 19, merkle.leaf_hash(proof.record.encode()),
                                proof.hashes, since.root)  # fmt: skip
    zero = "\\x" + "00" * 32
    tamper = f"SET hash = '{zero}' WHERE level = 1 AND idx = 7"
    pg.sql(f"ALTER TABLE floorguard.tree DISABLE TRIGGER USER; UPDATE floorguard.tree {tamper}")
    with pytest.raises(VerificationError, match=r"node \(1, 7\)"):
        checkpoint.of_chain(chain, previous=first)
    chain.close()


def test_the_search_for_a_stray_node_probes_the_trees_key_at_any_size(pg: Chain) -> None:
    """Every checkpoint since the last one looks for a node past the tree's last leaf. With
    the planner's statistics of a tree of thousands of nodes, each lower level must still
    be one probe of the primary key, never a read of the whole table (at a million records
    that read took 0.8 s of every checkpoint)."""
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    grow_postgres(pg.owner_url, load_key(pg.key_file), 20_000)
    pg.sql("ANALYZE floorguard.tree")
    query, params = stray_query("floorguard.tree", 20_001, "%s")
    with psycopg.connect(pg.owner_url) as conn:
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + query, params).fetchone()  # type: ignore[misc]
    scans = set(re.findall(r'"Node Type": "([A-Za-z ]*Scan)"', json.dumps(plan)))
    assert scans and scans <= {"Index Only Scan", "Index Scan", "Subquery Scan"}, scans
    with chain.tree_snapshot() as snap:
        assert snap.stray_node(20_001) is None and snap.stray_node(20_000) == (0, 20_000)
