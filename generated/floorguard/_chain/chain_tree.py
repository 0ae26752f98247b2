"""The chain's Merkle tree in its store: the tree a chain written before it existed lacks,
built from the records as stored, and records and tree hashes read from one snapshot, which
is what proofs are made of."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from floorguard._base._time import is_chain_ts
from floorguard._chain.chain_record import (
    EVENTS,
    GENESIS_PREV,
    _row_body,
    _row_body_and_line,
    _row_line,
    is_chain_id,
    is_mac,
    record_digest,
)
from floorguard._crypto import merkle
from floorguard.chainstore.interface import FirstReads, Node
from floorguard.errors import ChainError, ChainWriteError

if TYPE_CHECKING:
    from floorguard.chainstore.interface import ChainStore, ReadView, Row, WriteView


class TreeSnapshot:
    """Records and tree hashes read in one transaction: what proofs are made of.

    ``size`` is the number of records the tree holds (``AuditChain.ensure_tree`` first
    makes that every record). Raises ChainError on storage errors.
    """

    def __init__(self, store: ChainStore, first: FirstReads | None = None) -> None:
        self._store = store
        self._first = FirstReads() if first is None else first
        self._reading: contextlib.AbstractContextManager[ReadView | None] | None = None
        self._view: ReadView | None = None
        self.size = 0
        self.records = 0
        self._fetched: dict[tuple[int, int], bytes] = {}
        self._rows: dict[int, Row | None] = {}  # (prefetched: one snapshot, they hold)
        self._chain_id: str | None = None

    def __enter__(self) -> TreeSnapshot:
        self._reading = self._store.read(self._first)
        view = self._reading.__enter__()
        if view is None:
            return self
        try:
            self.records, self.size, self._chain_id = view.extent()
        except BaseException as exc:
            self._reading.__exit__(type(exc), exc, exc.__traceback__)
            self._reading = None
            raise
        self._view = view
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._view = None
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.__exit__(*exc_info)

    @property
    def present(self) -> bool:
        """Whether the chain's records table exists (an absent chain reads as empty)."""
        return self._view is not None

    def prefetch(self, keys: Iterable[tuple[int, int]], *, line: int | None = None) -> None:
        """Read the complete subtrees ``keys`` in one query, for ``subtree`` to answer
        from, and with ``line`` that record too (in the same round trip), for ``line`` to
        answer from. Raises ChainError."""
        if self._view is None:
            return
        fetched = self._fetched
        # (the views take a key asked twice as it is: no pass to drop repeats here)
        wanted = [key for key in keys if key not in fetched] if fetched else list(keys)
        if line is not None and line not in self._rows:
            found, self._rows[line] = self._view.subtrees_and_row(wanted, line)
        elif wanted:
            found = self._view.subtrees(wanted)
        else:
            return
        # (a stored value that is no hash is left for ``subtree`` to refuse)
        fetched.update([item for item in found.items() if len(item[1]) == merkle.HASH_SIZE])

    def subtree(self, level: int, index: int) -> bytes:
        """The stored hash of complete subtree (level, index). Raises ChainError."""
        if self._view is None:
            raise ChainError("the audit chain has no Merkle tree")
        found = self._fetched.get((level, index))
        if found is None:
            found = self._view.subtree(level, index)
        if found is None or len(found) != merkle.HASH_SIZE:
            raise ChainError(
                f"the Merkle tree of the audit chain {self._store.location} lacks subtree "
                f"({level}, {index}) (the database was altered)"
            )
        return found

    def lines(self, first: int = 0) -> Iterator[str]:
        """Every record's export line from seq ``first`` on, in seq order, streamed."""
        if self._view is not None:
            for row in self._view.rows(first, None):
                yield _row_line(row)

    def nodes(self) -> Iterator[Node]:
        """Every stored tree node, in the order a tree built leaf by leaf completes them."""
        if self._view is not None:
            yield from self._view.nodes()

    def nodes_ending(self, after: int, upto: int) -> Iterator[Node]:
        """The stored nodes that leaves ``after..upto-1`` complete, in ``nodes``' order."""
        if self._view is not None:
            yield from self._view.nodes_ending(after, upto)

    def stray_node(self, size: int) -> tuple[int, int] | None:
        """A stored node that no tree of ``size`` leaves holds, or None."""
        return None if self._view is None else self._view.stray_node(size)

    def chain_id(self) -> str | None:
        """The chain id of the genesis record, or None when there is none."""
        return self._chain_id

    def hashes(self, path: Iterable[list[tuple[int, int]]]) -> list[bytes]:
        """For each list of complete subtrees in ``path`` (``merkle.inclusion_path``), the
        tree hash they fold to. Raises ChainError (a subtree the tree lacks)."""
        fetched = self._fetched
        found = []
        for nodes in path:
            if len(nodes) == 1:
                one = fetched.get(nodes[0])
                found.append(one if one is not None else self.subtree(*nodes[0]))
            else:
                found.append(merkle.fold([self.subtree(*node) for node in nodes]))
        return found

    def ts_at(self, seq: int) -> str | None:
        """The ts of record ``seq``, or None."""
        return None if self._view is None else self._view.ts_at(seq)

    def line(self, seq: int) -> str | None:
        """The export line of record ``seq``, or None when there is none."""
        if self._view is None:
            return None
        row = self._rows[seq] if seq in self._rows else self._view.row(seq)
        return None if row is None else _row_line(row)

    def seq_of(self, receipt_id: str) -> int | None:
        """The seq of the first record of receipt ``receipt_id``, or None."""
        if self._view is None:
            return None
        return self._view.first_seq_of(receipt_id)


def _is_hash(value: object) -> bool:
    # A stored hash of another type or length is an altered tree: never hashed onward.
    return isinstance(value, bytes) and len(value) == merkle.HASH_SIZE


def _build_tree(view: WriteView, upto: int) -> None:
    """Add the leaves the tree lacks below ``upto``, from the records as they are stored,
    each one linked to the record before it and holding the receipt its id names (what can
    be checked without the chain's key): a record rewritten before the tree is built is
    refused, never made a leaf. Raises ChainWriteError."""
    start = view.tree_size()
    if start >= upto:
        return
    previous = GENESIS_PREV
    if start > 0:
        before = view.row(start - 1)
        if before is None:
            raise ChainWriteError(f"the audit chain has no record {start - 1}")
        previous = record_digest(_row_body(before).encode("utf-8"))

    def stored(level: int, index: int) -> bytes:
        found = view.subtree(level, index)
        if found is None or not _is_hash(found):
            raise ChainWriteError(f"the Merkle tree lacks subtree ({level}, {index})")
        return found

    edge = merkle.CompactRange.of(start, stored)
    pending: list[tuple[int, int, bytes]] = []
    expected = start
    chain_id = None  # (the last one found of its form: a chain's records share theirs)
    # (each row's fields are of their types: the stores refuse a row holding any other)
    for row in view.rows(start, upto - 1):
        if row[0] != expected:
            raise ChainWriteError(f"the audit chain has no record {expected}")
        if row[2] != chain_id:
            chain_id = row[2] if is_chain_id(row[2]) else None
        if not (chain_id is not None and is_chain_ts(row[1]) and row[3] in EVENTS
                and is_mac(row[7])):  # fmt: skip
            raise ChainWriteError(f"record {expected}'s stamp, chain id, event or mac is "
                                  "not of the chain's form")  # fmt: skip
        if row[6] != previous:
            raise ChainWriteError(f"record {expected}'s prev is not the digest of the record "
                                  "before it")  # fmt: skip
        if row[4] != record_digest(row[5].encode("utf-8")):
            raise ChainWriteError(f"record {expected}'s receipt_id is not its receipt's digest")
        expected += 1
        body, line = _row_body_and_line(row)
        previous = record_digest(body.encode("utf-8"))
        pending.extend(edge.append(merkle.leaf_hash(line.encode("utf-8"))))
        if len(pending) >= 4096:
            pending.sort()  # (each level's nodes together: each insert near the last)
            view.insert_nodes(pending)
            pending.clear()
    if expected != upto:
        raise ChainWriteError(f"the audit chain has no record {expected}")
    view.insert_nodes(pending)
