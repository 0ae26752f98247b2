"""Check an audit chain's stored Merkle tree against its records, from the outside."""

from __future__ import annotations

from floorguard._chain.chain import AuditChain
from floorguard._crypto import merkle


def tree_of_lines(lines: list[str]) -> merkle.CompactRange:
    """The tree over export lines (no newline), computed without the store."""
    compact = merkle.CompactRange()
    for line in lines:
        compact.append(merkle.leaf_hash(line.encode("utf-8")))
    return compact


def assert_tree_matches_records(chain: AuditChain) -> int:
    """Every stored leaf and the stored root agree with the records; the size."""
    lines = list(chain.export_lines())
    with chain.tree_snapshot() as snap:
        assert snap.size == snap.records == len(lines)
        for seq, line in enumerate(lines):
            assert snap.subtree(0, seq) == merkle.leaf_hash(line.encode("utf-8"))
        assert merkle.root(snap.size, snap.subtree) == tree_of_lines(lines).root()
    return len(lines)
