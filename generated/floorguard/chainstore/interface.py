"""What the audit chain needs from its storage: transactions over records, meta and tree.

The chain's logic (record format, MACs, prev links, the Merkle tree's arithmetic, slicing by
time) lives once, in ``floorguard._chain.chain``; a store only keeps rows. Two stores implement
this: ``sqlite`` (one file in ``FLOORGUARD_HOME``, the default) and ``postgres`` (a shared
database, ``FLOORGUARD_CHAIN_URL``). A store translates its driver's errors: reads raise
ChainError, writes ChainWriteError, each naming ``location`` and a reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

# The format of the stored chain (meta 'format'); a store refuses any other.
CHAIN_FORMAT = "1"
# seq, ts, chain_id, event, receipt_id, receipt (canonical JSON text), prev, mac
Row = tuple[int, str, str, str, str, str, str, str]
# (level, index, hash) of one complete subtree of the Merkle tree
Node = tuple[int, int, bytes]
T = TypeVar("T")
# The order of ReadView.nodes, in SQL both stores speak: by the end of a node's range, then
# by level. A row that no tree of 2^62 leaves holds (a negative or too large level or index:
# shifting it could overflow) sorts last, where the reader finds it left over.
NODE_ORDER = (
    "ORDER BY CASE WHEN level BETWEEN 0 AND 62 AND idx >= 0"
    " AND idx < (CAST(1 AS BIGINT) << (62 - level)) THEN (idx + 1) << level END NULLS LAST,"
    " level, idx"
)

# Levels a tree node can have (NODE_ORDER's bound): no tree of 2^62 leaves holds another.
MAX_LEVEL = 62
HASH_SIZE = 32  # (merkle.HASH_SIZE: a store imports no hashing)


def ending_query(tree: str, after: int, upto: int, mark: str) -> tuple[str, list[int]]:
    """SQL and parameters for ReadView.nodes_ending: per level, the index range of the
    nodes whose range ends in (after, upto] (an index range on the primary key each),
    sorted as NODE_ORDER sorts them."""
    arms, params = [], []
    for level in range(upto.bit_length()):
        low, high = after >> level, upto >> level
        if high > low:
            arms.append(
                f"SELECT level, idx, hash FROM {tree} WHERE level = {mark}"  # noqa: S608
                f" AND idx >= {mark} AND idx < {mark}"
            )
            params += [level, low, high]
    if not arms:
        return f"SELECT level, idx, hash FROM {tree} WHERE 1 = 0", []  # noqa: S608
    union = " UNION ALL ".join(arms)
    query = f"SELECT level, idx, hash FROM ({union}) AS ending"  # noqa: S608
    return query + " ORDER BY (idx + 1) << level, level", params


def stray_query(tree: str, size: int, mark: str) -> tuple[str, list[int]]:
    """SQL and parameters for ReadView.stray_node: a node no tree of ``size`` leaves
    holds. Each arm reads one end of one range of the primary key (the lowest and the
    highest level; per level, its lowest and its highest index) and keeps it if it is out
    of bounds. The end of a key range is one probe whatever the planner thinks of the
    table: asked instead for any row past a bound, PostgreSQL read a large tree whole for
    each of the lower levels (at a million records, 0.8 s of every checkpoint)."""
    ends = [  # (which rows, the end that is read, when that end is a stray)
        ("level IS NOT NULL", "level", "level < 0"),
        ("level IS NOT NULL", "level DESC", f"level > {MAX_LEVEL}"),
    ]
    params: list[int] = []
    for level in range(MAX_LEVEL + 1):
        ends.append((f"level = {mark} AND idx IS NOT NULL", "idx", "idx < 0"))
        ends.append((f"level = {mark} AND idx IS NOT NULL", "idx DESC", f"idx >= {mark}"))
        params += [level, level, size >> level]
    arms = [
        f"SELECT level, idx FROM (SELECT level, idx FROM {tree} WHERE {rows}"  # noqa: S608
        f" ORDER BY {end} LIMIT 1) AS a{n} WHERE {stray}"
        for n, (rows, end, stray) in enumerate(ends)
    ]
    return " UNION ALL ".join(arms) + " LIMIT 1", params


@dataclass(frozen=True)
class FirstReads:
    """What a read of the tree asks for first: ``ReadView.extent``, then
    ``subtrees_and_row(subtrees, row)`` when ``row`` is given. A store a round trip away
    may read them as the snapshot begins; the view answers the same either way."""

    subtrees: Sequence[tuple[int, int]] = ()
    row: int | None = None


class AheadMissed(Exception):
    """A write run ahead (on what the writer knew of the store before reading it) cannot
    go on: the store runs it again the ordinary way. Never leaves a store."""


class KnownHead(Protocol):
    """What a writer knew of its store after its own last write: the head and the tree
    nodes a next append reads (its right edge)."""

    @property
    def head(self) -> Row | None: ...

    @property
    def nodes(self) -> Mapping[tuple[int, int], bytes]: ...


class AheadView:
    """The part of a WriteView running ahead (see WriteView) that both stores share: the
    head and the tree nodes from ``known``; one record and its nodes kept until the attempt
    returns, then written by the store; any other read or write raises AheadMissed."""

    ahead = True
    rereads_meta = False

    def __init__(self, known: KnownHead) -> None:
        self._known = known
        self.record: Row | None = None
        self.new_nodes: list[Node] | None = None
        self.while_committing: Callable[[], object] | None = None

    def meanwhile(self, work: Callable[[], object]) -> None:
        """``work`` may run while the store waits for the server to commit this write (a
        store that does not wait never runs it): what is needed once the write is durable,
        prepared ahead. It must not depend on the commit, and it must not fail: what it
        prepares is taken only when it is there."""
        self.while_committing = work

    def head(self) -> Row | None:
        return self._known.head

    def clock(self) -> str | None:
        return None  # one machine: its own clock is the chain's

    def subtree(self, level: int, index: int) -> bytes | None:
        return self._known_node(level, index)

    def _known_node(self, level: int, index: int) -> bytes:
        found = self._known.nodes.get((level, index))
        if found is None:
            raise AheadMissed
        return found

    def edge(self, size: int) -> list[bytes]:
        """The hashes of the right edge of the tree of ``size`` leaves, the largest
        subtree's first (``merkle.CompactRange``'s order), each read through ``subtree``.
        Raises AheadMissed when one is not known, or not a hash."""
        return edge_of(size, lambda key: self.subtree(*key))

    def insert_record(self, row: Row) -> None:
        if self.record is not None:
            raise AheadMissed
        self.record = row

    def insert_nodes(self, nodes: Iterable[Node]) -> None:
        if self.record is None or self.new_nodes is not None:
            raise AheadMissed
        self.new_nodes = list(nodes)

    def _missed(self, *args: object) -> Any:
        raise AheadMissed

    record_count = tree_size = _missed
    row = ts_at = chain_id_at = extent = rows = first_seq_of = nodes = meta = insert_meta = _missed
    subtrees = subtrees_and_row = nodes_ending = stray_node = _missed


def edge_of(size: int, node: Callable[[tuple[int, int]], bytes | None]) -> list[bytes]:
    """The right edge of the tree of ``size`` leaves, each node looked up by ``node``
    (level, index); AheadMissed for one that is missing or not a 32-byte hash."""
    edge = []
    at = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            found = node((level, at >> level))
            if type(found) is not bytes or len(found) != HASH_SIZE:
                raise AheadMissed
            edge.append(found)
            at += 1 << level
    return edge


class ReadView(Protocol):
    """Records and tree as of one snapshot (one transaction)."""

    def record_count(self) -> int:
        """Records are seq 0..n-1; n (0 for none)."""

    def head(self) -> Row | None:
        """The record with the highest seq, or None."""

    def row(self, seq: int) -> Row | None:
        """Record ``seq``, or None."""

    def ts_at(self, seq: int) -> str | None:
        """The ts of record ``seq``, or None."""

    def chain_id_at(self, seq: int) -> str | None:
        """The chain_id of record ``seq``, or None."""

    def extent(self) -> tuple[int, int, str | None]:
        """``record_count()``, ``tree_size()`` and ``chain_id_at(0)`` in one query."""

    def rows(self, first: int, last: int | None) -> Iterator[Row]:
        """Records first..last (inclusive; None: to the head) in seq order, streamed."""

    def first_seq_of(self, receipt_id: str) -> int | None:
        """The lowest seq holding receipt ``receipt_id``, or None."""

    def tree_size(self) -> int:
        """The number of leaves the stored tree holds (0 when there is no tree)."""

    def subtree(self, level: int, index: int) -> bytes | None:
        """The stored hash of complete subtree (level, index), or None."""

    def nodes(self) -> Iterator[Node]:
        """The stored tree nodes, streamed in the order a tree built leaf by leaf completes
        them: by the end of its range ((index + 1) << level), then by level. Past the nodes
        of the tree of the stored records, a store may give only the first other node it
        finds, with or without its hash: every such node is one no record made."""

    def subtrees(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        """The stored hashes of the complete subtrees ``keys`` (level, index), read in one
        query; a key with no row is absent from the answer."""

    def subtrees_and_row(
        self, keys: Sequence[tuple[int, int]], seq: int
    ) -> tuple[dict[tuple[int, int], bytes], Row | None]:
        """``subtrees(keys)`` and ``row(seq)``, in one round trip where the store is one
        away."""

    def nodes_ending(self, after: int, upto: int) -> Iterator[Node]:
        """The stored nodes whose range ends in (after, upto] (those leaves after..upto-1
        complete), streamed in ``nodes``' order."""

    def stray_node(self, size: int) -> tuple[int, int] | None:
        """A stored node no tree of ``size`` leaves holds (past its last leaf, or of no
        tree at all), or None."""


class WriteView(ReadView, Protocol):
    """A write transaction that no other writer of the same chain runs beside.

    ``ahead``: whether the transaction runs ahead, on what the writer knew of the store
    (its own last write) rather than on what the store holds: its reads answer from that,
    anything it cannot answer raises AheadMissed, and the store itself checks, when the
    writes arrive, that the chain is still what the writer knew.

    ``rereads_meta``: whether an append reads the chain's stored id every time (a local
    file, where a read costs no round trip), rather than only when the head's is not the
    one it saw last.
    """

    ahead: bool
    rereads_meta: bool

    def meta(self, key: str) -> str | None:
        """The value stored under ``key`` in the chain's metadata, or None."""

    def insert_meta(self, key: str, value: str) -> None:
        """Store ``value`` under a new ``key``."""

    def insert_record(self, row: Row) -> None:
        """Insert one record (its seq must be new)."""

    def insert_nodes(self, nodes: Iterable[Node]) -> None:
        """Insert tree nodes (each (level, index) must be new)."""

    def clock(self) -> str | None:
        """The time every writer of the chain shares (a database server's, read under the
        transaction's lock), as ``format_ts`` writes it; None where the writer's own
        clock is the only one (a local file)."""


class ChainStore(Protocol):
    """Where the chain's rows live.

    ``location`` names it in messages (a path, or a URL without its password).
    ``creates_key``: whether the first append may create the chain key (a local file chain
    may; a shared chain's key is made once by ``floorctl chain init`` and distributed).
    ``write_budget``: the seconds within which a whole append must end, from the host's
    own lock to the commit (None: the store bounds each of its waits itself).
    ``stamp_slack_seconds``: how long before the chain's clock, read under the write lock,
    a record stored after may be stamped (a database server that takes a stamp some
    seconds old); 0 where every record is stamped under the lock.
    """

    location: str
    creates_key: bool
    write_budget: float | None
    stamp_slack_seconds: float

    def exists(self) -> bool:
        """True when the chain's storage exists (it may hold no records). Raises ChainError."""

    def write(
        self,
        attempt: Callable[[WriteView], T],
        doing: str,
        *,
        known_size: int | None = None,
        deadline: float | None = None,
        ahead: bool = False,
    ) -> T:
        """Run ``attempt`` in one serialised, durable write transaction; its result once
        committed. ``doing`` words errors ("append to"). ChainWriteError and KeyFileError
        from ``attempt`` pass through (nothing is committed); storage errors become
        ChainWriteError. ``known_size``: a hint, the tree size the appending host
        remembers; a store may prefetch that tree's left-edge nodes (for each bit L set in
        it, node (L, (known_size >> L) - 1)) with the head, so that ``subtree`` answers
        them without another round trip. ``attempt`` must be correct without it.
        ``deadline`` (``time.monotonic()``): when a store with a ``write_budget`` must
        have ended the whole write, connecting included; by default its budget from now.
        ``ahead``: ``attempt`` may run ahead (see WriteView), and a store that can may write
        in one round trip on what it knows from its own last write."""

    def read(self, first: FirstReads | None = None) -> AbstractContextManager[ReadView | None]:
        """One snapshot to read from; None when there is no chain yet. Raises ChainError.
        ``first``: a hint, what the read will ask for first (see FirstReads)."""

    def close(self) -> None:
        """Close cached connections (the next write reopens them)."""
