"""The chain in a PostgreSQL database shared by many hosts (``FLOORGUARD_CHAIN_URL``): the
store, its transactions, appends and reads.

psycopg 3 (the ``floorguard[postgres]`` extra) is imported only when this store is used.
The schema (``postgres_schema``, created by ``postgres_init``: ``floorctl chain init``)
lets a host's role read and write only through the chain's functions (``floorguard_api``). An
append is one transaction, two round trips: BEGIN and ``open_append`` (the chain's lock,
the server's clock, the head and the tree nodes the next leaf needs); then
``append_record`` with the COMMIT, in one pipeline. A process whose last append found the
chain quiet (its own previous record the head) appends ahead, in one round trip: BEGIN,
``append_next`` (the lock, a check that the tree's right edge is the one the process
knows, then append_record's checks and writes) and the COMMIT, in one pipeline; when
append_next refuses, nothing is written and the append runs the ordinary way. Records
take the server's clock. Commits are synchronous (a session that the server defaults to
``synchronous_commit=off`` is switched back on). Connect, statement, lock and
idle-in-transaction timeouts are the store's ``timeout`` (``FLOORGUARD_CHAIN_TIMEOUT``,
default 5 s; a connection, every host and address of the URL included, is made within it
whatever the URL says: ``postgres_wire``): an unreachable server, a failed login, a timeout
or a connection lost mid-append is a ChainWriteError (the spawn is refused), never a hang;
the next append connects afresh. Messages show the URL only as ``conninfo.describe`` does,
and a URL asking for TLS to a Unix socket is refused.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from floorguard._base._time import format_ts, parse_ts
from floorguard.chainstore import conninfo
from floorguard.chainstore.interface import (
    CHAIN_FORMAT,
    AheadMissed,
    AheadView,
    FirstReads,
    Node,
    Row,
    T,
    WriteView,
)
from floorguard.chainstore.postgres_schema import (
    AHEAD_SAMPLE_SECONDS,
    API_SCHEMA,
    APPENDER_ROLE,
    MAX_STAMP_AGE_SECONDS,
    META_VALUE_FOR_APPENDS,
    SCHEMA,
)
from floorguard.chainstore.postgres_wire import (
    Fired,
    _attempts,
    _checked,
    _close_quietly,
    _committed,
    _deadline,
    _import_psycopg,
    _left,
    _libpq,
    _loaded,
    _NoAnswer,
    _pipeline_results,
    _pipelined,
    _start,
    _statement_results,
    _Unprotected,
    without_server_words,
)
from floorguard.errors import ChainError, ChainWriteError, FloorguardError, KeyFileError

if TYPE_CHECKING:
    import psycopg


def redact(url: str, source: str = conninfo.URL_ENV) -> str:
    """What a message shows of ``url``: ``conninfo.describe`` (host, port, database and user
    in safe shapes; nothing else of it; ``source`` named for a URL that does not parse)."""
    return conninfo.describe(url, source)


# Every read and write is a call of a function of the chain's API schema: a host's role
# may not name the tables (postgres_schema, _READ_FUNCTIONS).
_HEAD = f"SELECT * FROM {API_SCHEMA}.head()"  # noqa: S608
# What an appender's writes become: calls of the chain's functions (it may write nothing
# else). A record and its tree nodes go out as one prepared call (_append_statement).
_INSERT_RECORD = "append_record"
_INSERT_NODES = f"SELECT {API_SCHEMA}.add_tree_nodes(%s::integer[], %s::bigint[], %s::bytea[])"


_NO_HEAD = object()
_PREDATES_API = (
    "its schema predates the functions this floorguard reads and appends through; have the "
    "chain's owner run `floorctl chain init --url URL` again"
)
# A read's snapshot, and what is there: the chain's API (an absent chain reads empty) and
# the tables' schema (without the API, a chain from before it: its owner must upgrade it).
_BEGIN_READ = (
    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;"
    f" SELECT pg_catalog.to_regprocedure('{API_SCHEMA}.extent()'),"
    f" pg_catalog.to_regnamespace('{SCHEMA}')"
).encode()
# ReadView.extent: the records, the tree's leaves and the chain's id.
_EXTENT = f"SELECT * FROM {API_SCHEMA}.extent()"  # noqa: S608
# The stored hashes of the complete subtrees whose levels and indexes are two arrays, and
# one record: as parameters ($1...), or written into a read's first message (integers only).
_SUBTREES_OF = f"SELECT * FROM {API_SCHEMA}.tree_nodes(%s::integer[], %s::bigint[])".encode()  # noqa: S608
_ROW_OF = f"SELECT * FROM {API_SCHEMA}.records(%s::bigint, %s::bigint, 1)".encode()  # noqa: S608
_SUBTREES = _SUBTREES_OF % (b"$1", b"$2")
_ROW = _ROW_OF % (b"$1", b"$1")
# Records and tree nodes are read a page at a time: a function's rows are all made before
# the first is sent, and a chain may hold millions.
_RECORDS_PAGE = 512
_LEAVES_PAGE = 32768
_RECORDS_FROM = f"SELECT * FROM {API_SCHEMA}.records(%s, %s, %s)"  # noqa: S608
_NODES_ENDING = f"SELECT * FROM {API_SCHEMA}.nodes_ending(%s, %s)"  # noqa: S608
_INT8_RANGE = range(-(2**63), 2**63)
# An append's first round trip, one message: BEGIN, then open_append (the chain's lock,
# the server's clock, the head and the tree nodes the next leaf needs; a statement
# prepared when the connection opens). READ COMMITTED whatever the session's default: each
# statement takes its snapshot when it starts, so the head is read after the lock is
# granted (the function refuses any other level).
_OPEN_NAME = b"floorguard_open"
_OPEN_TEXT = f"SELECT * FROM {API_SCHEMA}.open_append($1)".encode()  # noqa: S608


def _open_append_message(known_size: int | None) -> bytes:
    size = "NULL" if known_size is None else str(int(known_size))
    return f"BEGIN ISOLATION LEVEL READ COMMITTED; EXECUTE {_OPEN_NAME.decode()}({size})".encode()


@functools.cache
def _append_statement(count: int, edge: int | None = None) -> tuple[bytes, bytes, tuple[int, ...]]:
    """The prepared call appending a record with ``count`` tree nodes: its name, its text
    (libpq's $n placeholders) and its parameters' type oids (int8, 7 x text, then int4,
    int8, bytea per node). With ``edge``, the call of append_next, with that many nodes of
    the tree's right edge after them (int4, int8, bytea each)."""

    def array(first: int, n: int, kind: str) -> str:
        items = ", ".join(f"${first + 3 * i}" for i in range(n))
        return f"ARRAY[{items}]::{kind}[]" if n else f"'{{}}'::{kind}[]"

    def arrays(first: int, n: int) -> str:
        return ", ".join(
            array(first + i, n, kind) for i, kind in enumerate(("integer", "bigint", "bytea"))
        )

    function, name = "append_record", f"floorguard_append_{count}"
    extra = ""
    if edge is not None:
        function, name = "append_next", f"floorguard_next_{count}_{edge}"
        extra = ", " + arrays(9 + 3 * count, edge)
    columns = f"$1, $2, $3, $4, $5, $6, $7, $8, {arrays(9, count)}{extra}"
    text = f"SELECT {API_SCHEMA}.{function}({columns})"
    types = (_INT8, *(_TEXT,) * 7, *(_INT4, _INT8, _BYTEA) * (count + (edge or 0)))
    return name.encode(), text.encode(), types


_INT4, _INT8, _TEXT, _BYTEA = 23, 20, 25, 17  # pg_type oids
_BINARY = 1


def _binary_params(record: Row, nodes: list[Node], edge: Iterable[Node] = ()) -> list[bytes]:
    """The append statement's parameters in binary format: sent with their lengths, so a
    value is never cut at a NUL byte, and the server checks the text's encoding."""
    seq, *texts = record
    values = [struct.pack(">q", seq), *(str(text).encode("utf-8") for text in texts)]
    for level, index, digest in (*nodes, *edge):
        values += [struct.pack(">i", level), struct.pack(">q", index), bytes(digest)]
    return values


def _key_arrays(keys: Sequence[tuple[int, int]]) -> list[bytes]:
    """_SUBTREES's parameters for ``keys``: their levels and their indexes, as arrays in
    libpq's text form ("%d": digits and signs only, whatever the values' own str says)."""
    levels = b",".join([b"%d" % level for level, _ in keys])
    indexes = b",".join([b"%d" % index for _, index in keys])
    return [b"{" + levels + b"}", b"{" + indexes + b"}"]


def _add_subtrees(found: dict[tuple[int, int], bytes], rows: Iterable[tuple[Any, ...]]) -> None:
    for level, index, digest in rows:
        if digest is not None:
            found[(int(level), int(index))] = bytes(digest)


def _parse_nodes(text: bytes | None) -> dict[tuple[int, int], bytes]:
    """The nodes open_append returns ("level:index:hex,..."): keyed (level, index)."""
    nodes: dict[tuple[int, int], bytes] = {}
    for item in (text or b"").decode("ascii").split(","):
        if item:
            level, index, digest = item.split(":")
            nodes[(int(level), int(index))] = bytes.fromhex(digest)
    return nodes


class _View:
    """ReadView and WriteView over one psycopg connection inside a transaction.

    Writes are buffered until a read or the COMMIT needs them (so reads see the
    transaction's own writes); tree nodes read or written in the transaction are
    remembered. An append's record and tree rows go out as one prepared statement.
    """

    ahead = False
    # (a round trip; the server never reads the stored id for an append)
    rereads_meta = False

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        head: Any = _NO_HEAD,
        nodes: dict[tuple[int, int], bytes] | None = None,
        silence: float | None = None,
        prepared: set[bytes] | None = None,
        clock: str | None = None,
        extent: tuple[Any, ...] | None = None,
        rows: dict[int, Row | None] | None = None,
    ) -> None:
        self._conn = conn
        # The extent's row and records read with a read's start (a read-only snapshot: they
        # hold to its end).
        self._extent = extent
        self._rows = {} if rows is None else rows
        self._clock = clock  # the server's time when the append's head was read
        self.clock_read = time.monotonic()  # (a moment after the server read it)
        self.written: tuple[Row, list[Node]] | None = None  # committed by flush(commit=True)
        # A reader's limit on each wait for the server (a writer's whole transaction has
        # one already); ``fired`` tells whether the last one cut the connection.
        self._silence = silence
        self.fired = Fired()
        self._head = head
        self.head_read = head  # (the head as the transaction found it, whatever it writes)
        self._nodes = {} if nodes is None else nodes
        # The statements prepared on this connection (a writer's; see _append_statement).
        self._prepared = set() if prepared is None else prepared
        self._pending: list[tuple[str, Any]] = []

    def flush(self, *, commit: bool = False) -> None:
        """Send the buffered writes, then COMMIT when asked."""
        pending, self._pending = self._pending, []
        if len(pending) == 2 and pending[0][0] is _INSERT_RECORD and pending[1][0] is _INSERT_NODES:
            self._insert_record_and_nodes(pending[0][1], pending[1][1], commit=commit)
            return
        for query, params in pending:
            if query is _INSERT_RECORD:  # a record alone: its tree is not built yet
                self._insert_record_and_nodes(params, [], commit=False)
            elif query is _INSERT_NODES:  # many nodes (a tree being built): three arrays
                columns = tuple(list(column) for column in zip(*params, strict=True))
                self._conn.execute(query, columns)
            else:
                self._conn.execute(query, params)
        if commit:
            _committed(_libpq(self._conn, lambda pgconn: pgconn.exec_(b"COMMIT")))

    def _insert_record_and_nodes(self, record: Row, nodes: list[Node], *, commit: bool) -> None:
        """The record and its tree rows in one prepared statement, and with ``commit`` the
        COMMIT too, in one pipeline: one round trip."""
        name, text, types = _append_statement(len(nodes))
        params = _binary_params(record, nodes)
        formats = [_BINARY] * len(params)
        fresh = name not in self._prepared
        if not commit:
            if fresh:
                _libpq(self._conn, lambda pgconn: pgconn.prepare(name, text, types))
                self._prepared.add(name)
            _libpq(self._conn, lambda pgconn: pgconn.exec_prepared(name, params, formats))
            return

        def send(pgconn: Any) -> None:
            # (a statement not prepared yet on this session is prepared in the same round
            # trip: the lock is held meanwhile, and a distant host's every round trip counts)
            if fresh:
                pgconn.send_prepare(name, text, types)
            pgconn.send_query_prepared(name, params, formats)
            pgconn.send_query_params(b"COMMIT", None)

        results = _pipelined(self._conn, send, 3 if fresh else 2)
        if fresh:
            self._prepared.add(name)
        _committed(results[-1])
        self.written = (record, nodes)

    def _waiting(self) -> contextlib.AbstractContextManager[Any]:
        if self._silence is None:
            return contextlib.nullcontext()
        return self._guard(self._silence)

    @contextlib.contextmanager
    def _guard(self, seconds: float) -> Iterator[None]:
        with _deadline(self._conn, seconds) as fired:
            self.fired = fired
            yield

    def _one(self, query: str, params: tuple[Any, ...] = ()) -> Any:
        self.flush()
        with self._waiting():
            return self._conn.execute(query, params).fetchone()

    def record_count(self) -> int:
        return self.extent()[0]

    def head(self) -> Row | None:
        if self._head is not _NO_HEAD:
            row: Row | None = self._head
            return row
        found: Row | None = self._one(_HEAD)
        return found

    def row(self, seq: int) -> Row | None:
        if seq in self._rows:
            return self._rows[seq]
        if seq not in _INT8_RANGE:  # (no such seq can be stored)
            return None
        row: Row | None = self._one(_RECORDS_FROM, (seq, seq, 1))
        return row

    def ts_at(self, seq: int) -> str | None:
        row = self.row(seq)
        return None if row is None else str(row[1])

    def extent(self) -> tuple[int, int, str | None]:
        records, leaves, chain_id = self._extent if self._extent is not None else self._one(_EXTENT)
        return (
            0 if records is None else int(records) + 1,
            0 if leaves is None else int(leaves) + 1,
            None if chain_id is None else str(chain_id),
        )

    def chain_id_at(self, seq: int) -> str | None:
        row = self.row(seq)
        return None if row is None else str(row[2])

    def rows(self, first: int, last: int | None) -> Iterator[Row]:
        """The records from ``first`` to ``last``, a page at a time (each page from the
        seq after the last one read: a missing seq does not end it); the deadline covers
        the waits for the server, not the reader's."""
        self.flush()
        upper = 2**63 - 1 if last is None else last
        while first <= upper:
            page = self._all(_RECORDS_FROM, (first, upper, _RECORDS_PAGE))
            yield from page
            if len(page) < _RECORDS_PAGE:
                return
            first = int(page[-1][0]) + 1

    def _all(self, query: str, params: Sequence[object]) -> list[Any]:
        with self._waiting():
            return self._conn.execute(query, params).fetchall()

    def first_seq_of(self, receipt_id: str) -> int | None:
        row = self._one(f"SELECT {API_SCHEMA}.first_seq_of(%s)", (receipt_id,))
        return None if row is None or row[0] is None else int(row[0])

    def tree_size(self) -> int:
        return self.extent()[1]

    def subtree(self, level: int, index: int) -> bytes | None:
        known = self._nodes.get((level, index))
        if known is not None:
            return known
        # No flush: every node written in this transaction is in _nodes, so the buffered
        # writes cannot change the answer (and the record's row stays buffered, to go out
        # with the tree's rows in one statement).
        with self._waiting():
            row = self._conn.execute(
                f"SELECT hash FROM {API_SCHEMA}.tree_nodes(%s::integer[], %s::bigint[])",  # noqa: S608
                ([level], [index]),
            ).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

    def nodes(self) -> Iterator[Node]:
        """The nodes of the tree of the stored leaves and records (the fewer of the two),
        in NODE_ORDER, then the first stored node no such tree holds (stray_node, with no
        hash): whatever follows the tree's own nodes, a reader takes as one no record made,
        so the first is all it needs."""
        records, leaves, _ = self.extent()
        size = min(records, leaves)
        yield from self.nodes_ending(0, size)
        stray = self.stray_node(size)
        if stray is not None:
            yield stray[0], stray[1], b""

    def subtrees(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        found, wanted = self._known_subtrees(keys)
        if wanted:
            # Two arrays, one query: every node of a proof in one round trip.
            with self._waiting():
                result = _libpq(
                    self._conn, lambda pgconn: pgconn.exec_params(_SUBTREES, _key_arrays(wanted))
                )
            _add_subtrees(found, _loaded(self._conn, result))
        return found

    def subtrees_and_row(
        self, keys: Sequence[tuple[int, int]], seq: int
    ) -> tuple[dict[tuple[int, int], bytes], Row | None]:
        if seq not in _INT8_RANGE:  # (no such seq can be stored)
            return self.subtrees(keys), None
        if seq in self._rows:
            return self.subtrees(keys), self._rows[seq]
        self.flush()
        found, wanted = self._known_subtrees(keys)
        arrays = _key_arrays(wanted)
        seq_param = [str(seq).encode("ascii")]

        def send(pgconn: Any) -> None:
            if wanted:
                pgconn.send_query_params(_SUBTREES, arrays)
            pgconn.send_query_params(_ROW, seq_param)

        # The nodes and the record in one pipeline: one round trip.
        with self._waiting():
            results = _pipelined(self._conn, send, 2 if wanted else 1)
        if wanted:
            _add_subtrees(found, _loaded(self._conn, results[0]))
        rows = _loaded(self._conn, results[-1])
        row: Row | None = rows[0] if rows else None
        return found, row

    def _known_subtrees(
        self, keys: Sequence[tuple[int, int]]
    ) -> tuple[dict[tuple[int, int], bytes], list[tuple[int, int]]]:
        """The subtrees of ``keys`` read or written in the transaction, and the others."""
        known = self._nodes
        try:  # (all of them: the usual case once a proof's first reads are in)
            return {key: known[key] for key in keys}, []
        except KeyError:
            pass
        found, wanted = {}, []
        for key in keys:
            digest = known.get(key)
            if digest is None:
                wanted.append(key)
            else:
                found[key] = digest
        return found, list(dict.fromkeys(wanted)) if wanted else wanted

    def nodes_ending(self, after: int, upto: int) -> Iterator[Node]:
        """As ReadView.nodes_ending, a range of leaves at a time (the order is by the last
        leaf a node covers, so the pages follow one another in it): _LEAVES_PAGE leaves,
        twice as many after each empty page, so that a sparse range (stray nodes far past
        the last leaf) takes a few dozen pages, not billions."""
        self.flush()
        span = _LEAVES_PAGE
        while after < upto:
            end = min(upto, after + span)
            page = self._all(_NODES_ENDING, (after, end))
            for level, index, digest in page:
                yield int(level), int(index), bytes(digest)
            span = _LEAVES_PAGE if page else span * 2
            after = end

    def stray_node(self, size: int) -> tuple[int, int] | None:
        row = self._one(f"SELECT * FROM {API_SCHEMA}.stray_node(%s)", (size,))  # noqa: S608
        return None if row is None else (int(row[0]), int(row[1]))

    def clock(self) -> str | None:
        return self._clock

    def meta(self, key: str) -> str | None:
        row = self._one(META_VALUE_FOR_APPENDS, (key,))
        # (read_meta answers NULL for a key meta does not hold; its values are NOT NULL)
        return None if row is None or row[0] is None else str(row[0])

    def insert_meta(self, key: str, value: str) -> None:
        # (a host never reaches this: chain init stores the chain's id)
        insert = f"INSERT INTO {SCHEMA}.meta (key, value) VALUES (%s, %s)"  # noqa: S608
        self._pending.append((insert, (key, value)))

    def insert_record(self, row: Row) -> None:
        self._head = _NO_HEAD
        self._pending.append((_INSERT_RECORD, row))

    def known_nodes(self) -> dict[tuple[int, int], bytes]:
        """A copy of the tree nodes read (or prefetched) and written in the transaction."""
        return dict(self._nodes)

    def insert_nodes(self, nodes: Iterable[Node]) -> None:
        batch = list(nodes)
        if batch:
            self._nodes.update(((level, idx), digest) for level, idx, digest in batch)
            self._pending.append((_INSERT_NODES, batch))


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# append_next's refusals that mean the chain is not what this process knew (another writer
# appended, or the tree was changed), that its estimated stamp did not hold, or that another
# append holds the lock (append_next never waits): the append is then run again the
# ordinary way, which waits its turn and says what is wrong if anything is.
_AHEAD_MISSES = (b"40001", b"23514", b"55P03")  # serialization, check, lock_not_available
_MICROSECOND = datetime.timedelta(microseconds=1)


class _Ahead:
    """What this process knows of the chain after its last append on its kept connection:
    the record it wrote (the head, as far as it knows), the right edge of the tree after it
    with that record's leaf, and the server's clock as the append read it. Enough to write
    the next record in one round trip (append_next), stamped with the server's clock
    estimated from that reading and the time gone by since: a lower bound, since the
    reading was taken before it arrived here."""

    def __init__(self, head: Row, nodes: dict[tuple[int, int], bytes], server_us: int,
                 received: float) -> None:  # fmt: skip
        self.head = head
        self.nodes = nodes
        self.server_us = server_us
        self.received = received

    @classmethod
    def after(
        cls, record: Row, known: dict[tuple[int, int], bytes], clock: str | None, received: float
    ) -> _Ahead | None:
        """After ``record`` was committed, with ``known`` nodes (those read and written in
        its transaction) and the server's ``clock`` read before ``received``; None when
        something needed is not known."""
        return cls.of(record, cls.edge_after(record, known), clock, received)

    @staticmethod
    def edge_after(
        record: Row, known: dict[tuple[int, int], bytes]
    ) -> dict[tuple[int, int], bytes] | None:
        """The right edge of the tree with ``record``'s leaf, from ``known``; None when a
        node of it is not known."""
        size = record[0] + 1
        wanted = {(0, size - 1)}
        wanted.update((level, (size >> level) - 1) for level in range(size.bit_length())
                      if size >> level & 1)  # fmt: skip
        nodes = {key: known[key] for key in wanted if key in known}
        return nodes if len(nodes) == len(wanted) else None

    @classmethod
    def of(
        cls,
        record: Row,
        nodes: dict[tuple[int, int], bytes] | None,
        clock: str | None,
        received: float,
    ) -> _Ahead | None:
        """As ``after``, with the edge already taken (``edge_after``)."""
        if nodes is None or clock is None:
            return None
        try:
            moment = parse_ts(clock)
        except FloorguardError:
            return None
        server_us = (moment - _EPOCH) // _MICROSECOND
        return cls(record, nodes, server_us, received)

    def clock(self) -> str | None:
        """The server's clock now, estimated (not later than it is); None once the reading
        is too old to estimate from (AHEAD_SAMPLE_SECONDS) or time seems to have gone back."""
        elapsed = time.monotonic() - self.received
        if not 0 <= elapsed <= AHEAD_SAMPLE_SECONDS:
            return None
        moment = _EPOCH + datetime.timedelta(microseconds=self.server_us + int(elapsed * 1e6))
        return format_ts(moment)


class _AheadView(AheadView):
    """A WriteView running ahead on an _Ahead, with the server's clock as estimated; its
    record and nodes are buffered for append_next, and the nodes it read are sent along
    for the server to check."""

    def __init__(self, known: _Ahead, clock: str) -> None:
        super().__init__(known)
        self._clock = clock
        self.nodes_read: dict[tuple[int, int], bytes] = {}

    def clock(self) -> str | None:
        return self._clock

    def subtree(self, level: int, index: int) -> bytes | None:
        found = self._known_node(level, index)
        self.nodes_read[(level, index)] = found
        return found


def _first_message(first: FirstReads | None) -> tuple[bytes, int | None]:
    """A read's first message: BEGIN and the table check, then what ``first`` names (its
    integers written into the text: a simple query takes no parameters); and the record it
    reads, if any (none beyond a bigint: no such seq can be stored)."""
    if first is None:
        return _BEGIN_READ, None
    statements = [_BEGIN_READ, _EXTENT.encode()]
    if first.subtrees:
        levels, indexes = _key_arrays(first.subtrees)
        statements.append(_SUBTREES_OF % (b"'" + levels + b"'", b"'" + indexes + b"'"))
    row = first.row if first.row is not None and first.row in _INT8_RANGE else None
    if row is not None:
        seq = b"%d" % row
        statements.append(_ROW_OF % (seq, seq))
    return b"; ".join(statements), row


class _Begun:
    """What a read found as it began: the extent's row, the tree nodes and the records it
    was asked for."""

    def __init__(self) -> None:
        self.extent: tuple[Any, ...] | None = None
        self.nodes: dict[tuple[int, int], bytes] = {}
        self.rows: dict[int, Row | None] = {}

    def read(
        self, conn: psycopg.Connection[Any], results: list[Any], first: FirstReads, row: int | None
    ) -> None:
        """Take the results of _first_message's statements after the table check. Raises
        psycopg's errors."""
        pg = _import_psycopg()
        expected = 1 + bool(first.subtrees) + (row is not None)
        for result in results:
            _checked(conn.pgconn, result)
        if len(results) != expected:
            raise pg.OperationalError(
                f"{len(results)} results for the read's {expected} first statements"
            )
        loader = pg.adapt.Transformer(conn)
        self.extent = _loaded(conn, results[0], loader)[0]
        if first.subtrees:
            _add_subtrees(self.nodes, _loaded(conn, results[1], loader))
        if row is not None:
            rows = _loaded(conn, results[-1], loader)
            self.rows[row] = rows[0] if rows else None


def _lock_wait_ms(timeout_ms: int) -> int:
    """How long a session waits for a lock: a little less than its statement may run, so
    that a held lock is reported as such."""
    return max(1, timeout_ms * 9 // 10)


def _connection_lost(exc: Exception) -> bool:
    """Whether ``exc`` says the session itself is gone (no answer from the server at all,
    or its connection or shutdown class), which a fresh session may retry, rather than
    a refusal the server gave it (a busy lock, a cancelled statement), which it would
    only give again."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


class _ConnectionLost(Exception):
    """A kept connection was found closed by the server before anything was read."""


def _idle(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn`` is open and in no transaction."""
    return (
        not conn.closed
        and conn.pgconn.transaction_status == _import_psycopg().pq.TransactionStatus.IDLE
    )


def _discard(conn: psycopg.Connection[Any] | None, opened_by: int) -> None:
    """Close ``conn``, opened by the process ``opened_by``. One inherited over fork has the
    parent's socket: it is pointed at /dev/null first, so that closing it here cannot end
    the parent's session."""
    if conn is None:
        return
    if opened_by != os.getpid():
        with contextlib.suppress(Exception):
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, conn.fileno())
            os.close(null)
    _close_quietly(conn)


class PostgresStore:
    """The chain in the PostgreSQL database ``url`` (a libpq URL or key=value string).

    Constructing one connects to nothing; the write connection is opened on the first
    append, kept, and reopened after a fork or a failure. Each read uses its own
    connection, in one REPEATABLE READ snapshot.
    """

    creates_key = False
    # The server stores a record stamped up to that long before it stores it (at its
    # transaction's start, which an appender chooses, or ahead): MAX_STAMP_AGE_SECONDS.
    stamp_slack_seconds = float(MAX_STAMP_AGE_SECONDS)

    def __init__(self, url: str, *, timeout: float, source: str = conninfo.URL_ENV) -> None:
        self.url = url
        self.timeout = timeout
        self.source = source  # (where the URL came from: a variable, an option)
        self.location = redact(url, source)
        self._secrets = conninfo.secrets_of(url)  # with libpq's reading once connecting
        # The client's own limits: a whole append ends within ``write_budget`` of its
        # start, whatever it waits on (this host's view lock, each host of the URL, the
        # session's setup, the chain's lock, a silent server); the server's own limits
        # (each ``timeout``, per statement) fire first on any one wait. A read's wait on a
        # silent server ends after ``silence``.
        self.silence = 2 * timeout
        self.write_budget: float | None = 2 * timeout
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._conn_pid = 0
        self._prepared: set[bytes] = set()  # on self._conn
        # Appending ahead (append_next, one round trip): what this process knows after its
        # last append on self._conn, while the chain is quiet (no other writer appended
        # between its last two appends); the record it last wrote; and whether the chain's
        # schema lacks append_next.
        self._ahead: _Ahead | None = None
        self._last_written: Row | None = None
        self._ahead_unsupported = False
        # One read connection kept between reads (opening one costs more than a proof's
        # queries): for one read at a time in this process; a read meanwhile opens its own.
        self._reader_lock = threading.Lock()
        self._reader: psycopg.Connection[Any] | None = None
        self._reader_pid = 0

    # -- connections --

    def _connect(
        self, error: type[ChainError], doing: str, *, by: float | None = None
    ) -> psycopg.Connection[Any]:
        """A connection opened and set up within ``timeout`` of its first byte, whatever the
        URL says (``connect_timeout``, several hosts, ``target_session_attrs``...): libpq's
        own connect timeout is whole seconds, at least 2, per host, and 0 means none, so the
        connection is made here, non-blocking, against one deadline. Every later wait is
        bounded too: a writer's transaction that stalls (a frozen process holding the
        chain's lock) is ended by the server after ``timeout``; a reader's is not, as an
        export may wait on a slow consumer. ``by``: an earlier deadline (an append's)."""
        pg = _import_psycopg()
        deadline = time.monotonic() + self.timeout
        if by is not None:
            deadline = min(deadline, by)
        ms = max(1, int(self.timeout * 1000))
        try:
            params = pg.conninfo.conninfo_to_dict(self.url)
        except pg.Error as exc:
            raise error(
                f"cannot {doing} the audit chain: {self.source} is not a libpq URL "
                f"({self._scrub(str(exc), parsed=False)})"
            ) from None
        self._secrets = conninfo.secrets_of(self.url, params)
        # libpq ignores sslmode on a Unix socket: refused before a byte is sent to one.
        unprotected = conninfo.tls_over_socket(params, os.environ)
        if unprotected is not None:
            raise error(f"cannot {doing} the audit chain {self.location}: {unprotected}")
        # The operator's own settings in the URL win; these bound every wait otherwise.
        # Records are UTF-8 text, sent and read as such whatever the URL or the database
        # says (in another client encoding the server would store other characters).
        params["client_encoding"] = "UTF8"
        params.setdefault("application_name", "floorguard")
        params.setdefault("tcp_user_timeout", str(ms))
        params.setdefault("keepalives", "1")
        params.setdefault("keepalives_idle", str(max(1, int(self.timeout))))
        params.setdefault("keepalives_interval", "1")
        params.setdefault("keepalives_count", "3")
        conn = self._open(pg, params, deadline, error, doing)
        try:
            # The session's setup shares the connection's deadline (a little slack, so
            # that a connection made at the last moment is not cut at once).
            slack = 0.2 if by is None else 0.0  # (an append's deadline is kept exactly)
            with _deadline(conn, max(deadline - time.monotonic(), slack, 0.001)) as fired:
                return self._configure(conn, error, doing, ms, fired)
        except BaseException:
            _close_quietly(conn)
            raise

    def _open(
        self, pg: Any, params: dict[str, Any], deadline: float, error: type[ChainError], doing: str
    ) -> psycopg.Connection[Any]:
        """A connection to the first host that takes one before ``deadline``: each host
        (each address of a name) in turn, as libpq would, with an equal share of the time
        left, or less when the URL's ``connect_timeout`` says so."""
        failed = f"cannot {doing} the audit chain {self.location}"
        limit = f"{self.timeout:g}s (FLOORGUARD_CHAIN_TIMEOUT)"
        try:
            attempts = _attempts(pg, params, deadline)
        except pg.Error as exc:
            raise error(f"{failed}: {self.explain(exc)}") from None
        except TimeoutError:
            raise error(f"{failed}: its host names did not resolve within {limit}") from None
        own_limit = str(params.get("connect_timeout", "")).strip()
        per_host = max(2, int(own_limit)) if own_limit.isdigit() and int(own_limit) > 0 else None
        last: Exception | None = None
        for index, attempt in enumerate(attempts):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            share = left / (len(attempts) - index)
            try:
                pgconn = _start(pg, attempt, min(share, per_host or share))
            except _Unprotected as exc:
                raise error(f"{failed}: {exc}") from None
            except (pg.Error, _NoAnswer) as exc:
                last = exc
                continue
            conn: psycopg.Connection[Any] = pg.Connection(pgconn)
            conn.autocommit = True
            return conn
        tried = "" if len(attempts) < 2 else f"; {len(attempts)} hosts or addresses tried"
        if last is None or isinstance(last, _NoAnswer):
            raise error(f"{failed}: the database did not answer within {limit}{tried}")
        raise error(f"{failed}: {self.explain(last, opening=True)}{tried}") from None

    def _scrub(self, text: str, *, parsed: bool = True) -> str:
        """``text`` (a message of libpq's or the server's) without any part of the URL that
        its location does not show, nor the password libpq may read from PGPASSWORD."""
        secrets = self._secrets
        password = os.environ.get("PGPASSWORD", "")
        extra = [password] if len(password) >= 3 else []
        return conninfo.scrub(text, [*extra, *secrets], parsed=parsed)

    def _configure(
        self,
        conn: psycopg.Connection[Any],
        error: type[ChainError],
        doing: str,
        ms: int,
        fired: Fired,
    ) -> psycopg.Connection[Any]:
        pg = _import_psycopg()
        # The password libpq logged in with, wherever it read it (a passfile, a service
        # file): hidden from whatever the server says from now on, as the URL's are.
        used = conn.pgconn.password
        if used and len(used) >= 3:
            secret = used.decode("utf-8", "replace")
            if secret not in self._secrets:
                self._secrets = [*self._secrets, secret]
        try:
            # The lock wait gives up a little before the statement would, so that a held
            # lock is reported as such.
            # Every name the store uses is schema-qualified; the search path is pinned as
            # well, so that no object another role creates can stand in for a built-in. The
            # functions are compiled with the session's settings: backslashes in their
            # literals must read as written ('\u0000' is six characters).
            settings = conn.execute(
                "SELECT pg_catalog.set_config('statement_timeout', %s, false),"
                " pg_catalog.set_config('lock_timeout', %s, false),"
                " pg_catalog.set_config('idle_in_transaction_session_timeout', %s, false),"
                " pg_catalog.current_setting('synchronous_commit'),"
                " pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false),"
                " pg_catalog.set_config('standard_conforming_strings', 'on', false)",
                (str(ms), str(_lock_wait_ms(ms)), str(ms) if error is ChainWriteError else "0"),
            ).fetchone()
            if settings is None or settings[3] == "off":
                # A decision is returned only once its record is durably committed.
                conn.execute("SET synchronous_commit = on")
        except pg.Error as exc:
            reason = self.explain(exc, fired, connecting=True)
            raise error(f"cannot {doing} the audit chain {self.location}: {reason}") from None
        return conn

    def _writer(self, doing: str, deadline: float) -> tuple[psycopg.Connection[Any], bool]:
        """The cached write connection (and whether it was just opened), opened before
        ``deadline``."""
        if self._conn is not None:
            # Kept only when idle: a BEGIN inside a transaction left open would not begin one.
            if (
                self._conn_pid == os.getpid()
                and not self._conn.closed
                and self._conn.pgconn.transaction_status
                == _import_psycopg().pq.TransactionStatus.IDLE
            ):
                return self._conn, False
            self._drop_connection()
        pg = _import_psycopg()
        conn = self._connect(ChainWriteError, doing, by=deadline)
        try:
            with _deadline(conn, _left(deadline)) as fired:
                row = conn.execute(META_VALUE_FOR_APPENDS, ("format",)).fetchone()
                if row is not None and row[0] == CHAIN_FORMAT:
                    # psycopg would prepare statements of its own, and drop every prepared
                    # statement of the session at the first ROLLBACK: ours are kept.
                    conn.prepare_threshold = None
                    _libpq(conn, lambda pgconn: pgconn.prepare(_OPEN_NAME, _OPEN_TEXT, [_INT8]))
        except (pg.errors.UndefinedFunction, pg.errors.InvalidSchemaName):
            _close_quietly(conn)
            raise ChainWriteError(
                f"cannot {doing} the audit chain {self.location}: {_PREDATES_API}"
            ) from None
        except pg.Error as exc:
            _close_quietly(conn)
            raise ChainWriteError(
                f"cannot {doing} the audit chain {self.location}: "
                f"{self.explain(exc, fired, appending=True)}"
            ) from None
        if row is None or row[0] != CHAIN_FORMAT:
            _close_quietly(conn)
            raise ChainWriteError(
                f"cannot {doing} the audit chain {self.location}: unknown format "
                f"{row[0] if row else None!r} (this floorguard writes format {CHAIN_FORMAT}; "
                "run `floorctl chain init --url URL` on a new database)"
            )
        self._conn, self._conn_pid = conn, os.getpid()
        self._prepared = {_OPEN_NAME}
        return conn, True

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        self._ahead = None
        _discard(conn, self._conn_pid)

    def _drop_reader(self) -> None:
        conn, self._reader = self._reader, None
        _discard(conn, self._reader_pid)

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
        with self._reader_lock:
            self._drop_reader()

    def exists(self) -> bool:
        with self.read() as view:
            return view is not None

    # -- writing --

    def write(
        self,
        attempt: Callable[[WriteView], T],
        doing: str,
        *,
        known_size: int | None = None,
        deadline: float | None = None,
        ahead: bool = False,
    ) -> T:
        """As ChainStore.write; with ``known_size`` (a witness's tree size), the stored
        nodes of the left edge of a tree of that size come with the head, in the same round
        trip, so ``view.subtree`` answers them without asking the server."""
        pg = _import_psycopg()
        if deadline is None:
            deadline = time.monotonic() + self.silence
        with self._lock:
            known = self._ahead_known() if ahead else None
            if known is not None:
                try:
                    return self._write_ahead(known, attempt, doing, deadline)
                except AheadMissed:
                    self._ahead = None  # until an append finds the chain quiet again
            for _ in range(2):
                conn, fresh = self._writer(doing, deadline)
                with _deadline(conn, _left(deadline)) as fired:
                    try:
                        view = self._open_append(conn, known_size)
                    except pg.OperationalError as exc:
                        self._drop_connection()
                        if fresh or fired.is_set() or not _connection_lost(exc):
                            raise ChainWriteError(
                                f"cannot {doing} the audit chain {self.location}: "
                                f"{self.explain(exc, fired, appending=True)}"
                            ) from None
                        continue  # a kept connection gone stale (a restart): nothing written
                    except (pg.Error, ValueError) as exc:
                        # Not kept: a session that refused a statement may have lost what
                        # it prepared (DISCARD ALL, a changed table); the next one prepares.
                        self._drop_connection()
                        raise ChainWriteError(
                            f"cannot {doing} the audit chain {self.location}: "
                            f"{self.explain(exc, fired, appending=True)}"
                        ) from None
                    return self._finish(conn, view, attempt, doing, fired)
            raise AssertionError("unreachable")  # pragma: no cover

    def _finish(
        self,
        conn: psycopg.Connection[Any],
        view: _View,
        attempt: Callable[[WriteView], T],
        doing: str,
        fired: Fired,
    ) -> T:
        pg = _import_psycopg()
        self._ahead = None
        try:
            result = attempt(view)
            view.flush(commit=True)
        except AheadMissed:  # (an ordinary view never runs ahead)
            self._rollback(conn)
            raise AssertionError("an append not run ahead missed") from None
        except (KeyFileError, ChainWriteError):
            self._rollback(conn)
            raise
        except pg.Error as exc:
            self._drop_connection()  # as in write: the next append opens a fresh session
            raise ChainWriteError(
                f"cannot {doing} the audit chain {self.location}: "
                f"{self.explain(exc, fired, appending=True)}"
            ) from None
        except BaseException:
            self._rollback(conn)
            raise
        if view.written is not None:
            record, nodes = view.written
            # Quiet: the head this append read is the record this process wrote last, so
            # its next append will likely find its own record the head again.
            quiet = self._last_written is not None and view.head_read == self._last_written
            self._last_written = record
            if quiet and not self._ahead_unsupported:
                known = view.known_nodes()
                known.update(((level, index), digest) for level, index, digest in nodes)
                self._ahead = _Ahead.after(record, known, view.clock(), view.clock_read)
        return result

    # -- appending ahead --

    def _ahead_known(self) -> _Ahead | None:
        """What this process knows to append ahead with, when it may now."""
        known = self._ahead
        if known is None or self._ahead_unsupported:
            return None
        conn = self._conn
        if (
            conn is None
            or conn.closed
            or self._conn_pid != os.getpid()
            or conn.pgconn.transaction_status != _import_psycopg().pq.TransactionStatus.IDLE
        ):
            return None
        return known

    def _write_ahead(
        self,
        known: _Ahead,
        attempt: Callable[[WriteView], T],
        doing: str,
        deadline: float,
    ) -> T:
        """``attempt`` run ahead on ``known``, and its record written by append_next in one
        round trip: BEGIN, the call and COMMIT in one pipeline. Raises AheadMissed when the
        attempt needs what ``known`` does not hold or the server finds that the chain is
        not what this process knew (nothing is then written); other errors as write."""
        pg = _import_psycopg()
        clock = known.clock()
        if clock is None:
            raise AheadMissed
        view = _AheadView(known, clock)
        result = attempt(view)
        record, nodes = view.record, view.new_nodes
        if record is None or nodes is None:
            raise AheadMissed
        edge = [
            (level, index, digest) for (level, index), digest in sorted(view.nodes_read.items())
        ]
        name, text, types = _append_statement(len(nodes), len(edge))
        conn = self._conn
        if conn is None:  # (_ahead_known saw it open)
            raise AheadMissed
        with _deadline(conn, _left(deadline)) as fired:
            try:
                if name not in self._prepared:
                    prepared = conn.pgconn.prepare(name, text, types)
                    if prepared.status != pg.pq.ExecStatus.COMMAND_OK:
                        state = prepared.error_field(pg.pq.DiagnosticField.SQLSTATE)
                        # A chain initialised before append_next: never ahead on it.
                        self._ahead_unsupported = state == b"42883"  # undefined_function
                        raise AheadMissed
                    self._prepared.add(name)
                params = _binary_params(record, nodes, edge)
                formats = [_BINARY] * len(params)

                def send(pgconn: Any) -> None:
                    pgconn.send_query_params(b"BEGIN ISOLATION LEVEL READ COMMITTED", None)
                    pgconn.send_query_prepared(name, params, formats)
                    pgconn.send_query_params(b"COMMIT", None)

                # While the server works: the edge the next append will know, and what the
                # attempt left to prepare (used only if the commit succeeds).
                edge_after: list[dict[tuple[int, int], bytes] | None] = []

                def meanwhile() -> None:
                    known = dict(view.nodes_read)
                    known.update(((level, index), digest) for level, index, digest in nodes)
                    edge_after.append(_Ahead.edge_after(record, known))
                    if view.while_committing is not None:
                        view.while_committing()

                results = _pipeline_results(conn, send, meanwhile)
                received = time.monotonic()
            except pg.Error as exc:
                self._drop_connection()  # lost mid-append: the next one opens a fresh session
                raise ChainWriteError(
                    f"cannot {doing} the audit chain {self.location}: "
                    f"{self.explain(exc, fired, appending=True)}"
                ) from None
            succeeded = (pg.pq.ExecStatus.COMMAND_OK, pg.pq.ExecStatus.TUPLES_OK)
            failed = next((r for r in results if r.status not in succeeded), None)
            if failed is not None or len(results) != 3:
                self._rollback(conn)
                state = (
                    None if failed is None else failed.error_field(pg.pq.DiagnosticField.SQLSTATE)
                )
                if state in _AHEAD_MISSES or failed is None:
                    raise AheadMissed
                error = pg.errors.error_from_result(failed, encoding="utf-8")
                if not isinstance(error, pg.errors.LockNotAvailable | pg.errors.QueryCanceled):
                    self._drop_connection()  # as in _finish: the next append opens afresh
                raise ChainWriteError(
                    f"cannot {doing} the audit chain {self.location}: "
                    f"{self.explain(error, fired, appending=True)}"
                ) from None
            try:
                _committed(results[2])
            except pg.Error as exc:
                self._drop_connection()
                raise ChainWriteError(
                    f"cannot {doing} the audit chain {self.location}: "
                    f"{self.explain(exc, fired, appending=True)}"
                ) from None
        self._last_written = record
        served = results[1].get_value(0, 0) if results[1].ntuples == 1 else None
        self._ahead = _Ahead.of(
            record,
            edge_after[0] if edge_after else None,
            None if served is None else served.decode("ascii"),
            received,
        )
        return result

    def _open_append(self, conn: psycopg.Connection[Any], known_size: int | None = None) -> _View:
        """BEGIN, the chain's lock (every appender on every host waits here: one linear
        chain), the head with the tree nodes the next leaf needs and, with ``known_size``,
        the left edge of a tree of that size: one round trip."""
        message = _open_append_message(known_size)
        found = _libpq(conn, lambda pgconn: pgconn.exec_(message))
        values = [found.get_value(0, column) for column in range(10)]
        try:
            now = values[0].decode("ascii")
            nodes = _parse_nodes(values[9])
            if values[1] is None:  # no head: an empty chain
                return _View(conn, head=None, nodes=nodes, prepared=self._prepared, clock=now)
            seq = int(values[1])
            head = (seq, *(value.decode("utf-8") for value in values[2:9]))
        except (ValueError, AttributeError) as exc:
            raise ValueError(f"the head record read back is malformed ({exc})") from exc
        return _View(conn, head=head, nodes=nodes, prepared=self._prepared, clock=now)

    def _rollback(self, conn: psycopg.Connection[Any]) -> None:
        try:
            _libpq(conn, lambda pgconn: pgconn.exec_(b"ROLLBACK"))
        except Exception:
            self._drop_connection()  # a connection that cannot roll back is not kept

    # -- reading --

    @contextlib.contextmanager
    def read(self, first: FirstReads | None = None) -> Iterator[_View | None]:
        """As ChainStore.read; what ``first`` names is read with the snapshot's BEGIN, in
        its round trip."""
        pg = _import_psycopg()
        kept = self._reader_lock.acquire(blocking=False)
        try:
            conn = self._kept_reader() if kept else None
            reused = conn is not None
            if conn is None:
                conn = self._connect(ChainError, "read")
            if kept:  # (from here on: closed below unless the read ends cleanly)
                self._reader, self._reader_pid = conn, os.getpid()
            done = False
            try:
                try:
                    begun = self._begin_read(conn, first, retried=not reused)
                except _ConnectionLost:
                    # A kept connection the server has ended since (a restart, an idle
                    # limit): nothing was read, so the read starts again on a new one.
                    _discard(conn, os.getpid())
                    self._reader = None
                    conn = self._connect(ChainError, "read")
                    if kept:
                        self._reader, self._reader_pid = conn, os.getpid()
                    begun = self._begin_read(conn, first, retried=True)
                if begun is None:
                    yield None
                else:
                    view = _View(conn, silence=self.silence, extent=begun.extent,
                                 nodes=begun.nodes, rows=begun.rows)  # fmt: skip
                    try:
                        yield view
                    except pg.Error as exc:
                        raise ChainError(
                            f"cannot read the audit chain {self.location}: "
                            f"{self.explain(exc, view.fired)}"
                        ) from None
                # The snapshot ends here: a kept connection holds no transaction between reads.
                with _deadline(conn, self.silence) as fired:
                    _libpq(conn, lambda pgconn: pgconn.exec_(b"ROLLBACK"))
                done = not fired.is_set() and _idle(conn)
            finally:
                if not kept:
                    _close_quietly(conn)
                elif not done:
                    self._drop_reader()
        finally:
            if kept:
                self._reader_lock.release()

    def _kept_reader(self) -> psycopg.Connection[Any] | None:
        """The kept read connection (under ``_reader_lock``) when this process opened it and
        it is idle; else None, and any other kept one is let go."""
        conn = self._reader
        if conn is not None and self._reader_pid == os.getpid() and _idle(conn):
            return conn
        self._drop_reader()
        return None

    def _begin_read(
        self,
        conn: psycopg.Connection[Any],
        first: FirstReads | None,
        *,
        retried: bool,
    ) -> _Begun | None:
        """Begin the read's snapshot on ``conn``, and read what ``first`` names: None when
        the chain's tables are absent. Raises _ConnectionLost when a kept connection
        (``retried`` False) turns out closed by the server, ChainError for anything else."""
        pg = _import_psycopg()
        message, row = _first_message(first)
        try:
            with _deadline(conn, self.silence) as fired:
                # One round trip: the statements as one simple query, a result each (the
                # first that reads a table fails when the tables are absent: the snapshot
                # is then read as empty).
                results = _statement_results(conn, message)
                for result in results[:2]:
                    _checked(conn.pgconn, result)
                if len(results) < 2:
                    raise pg.OperationalError("one result for the read's statements")
                if results[1].ntuples != 1 or results[1].get_value(0, 0) is None:
                    if results[1].ntuples == 1 and results[1].get_value(0, 1) is not None:
                        raise ChainError(
                            f"cannot read the audit chain {self.location}: {_PREDATES_API}"
                        )
                    return None
                begun = _Begun()
                if first is not None:
                    begun.read(conn, results[2:], first, row)
        except pg.Error as exc:
            if not retried and not fired.is_set() and conn.closed:
                raise _ConnectionLost from None
            raise ChainError(
                f"cannot read the audit chain {self.location}: {self.explain(exc, fired)}"
            ) from None
        return begun

    def explain(
        self,
        exc: BaseException,
        silent: Fired | None = None,
        *,
        connecting: bool = False,
        appending: bool = False,
        opening: bool = False,
    ) -> str:
        """A one-line reason a person can act on, from a psycopg error (``silent``: set
        when the client's own deadline cut the connection, ``connecting``: the deadline of
        the connection's setup, ``appending``: an append's). Nothing of the URL but its
        location is ever in it."""
        pg = _import_psycopg()
        errors = pg.errors
        diag = getattr(exc, "diag", None)
        primary = getattr(diag, "message_primary", None) if diag is not None else None
        # The server's or libpq's words, less anything of the URL they may quote.
        raw = primary or str(exc)
        if opening:
            # Before the login is through, whoever answers may quote back what it was
            # sent (a password from a passfile, a service file, or spelled otherwise):
            # libpq's own words are kept, the server's replaced by their SQLSTATE.
            raw = without_server_words(raw, getattr(diag, "sqlstate", None))
        text = self._scrub(raw)
        limit = f"{self.timeout:g}s (FLOORGUARD_CHAIN_TIMEOUT)"
        if silent is not None and silent.is_set():
            if connecting:
                return f"the database did not answer within {limit}; the connection was cut"
            if appending:
                return (
                    f"no answer in time: the append did not end within {self.write_budget:g}s "
                    "of its start (twice FLOORGUARD_CHAIN_TIMEOUT); the connection was cut"
                )
            return (
                f"the database went silent: no answer within {self.silence:g}s "
                f"(twice FLOORGUARD_CHAIN_TIMEOUT); the connection was cut"
            )
        if isinstance(exc, errors.DeadlockDetected):
            return f"{text} (the server ended this transaction to break a lock cycle)"
        if isinstance(exc, errors.LockNotAvailable):
            waited = _lock_wait_ms(max(1, int(self.timeout * 1000))) / 1000
            return (
                f"the chain's lock was not free within {waited:g}s (nine tenths of {limit}): "
                "another session held it (an appender, several in turn, or the database's "
                "owner, whose sessions are never ended), or a starved append claimed it; a "
                "holder past meta lock_hold_limit_ms is ended, and the server's log names it"
            )
        if isinstance(exc, errors.QueryCanceled):
            return f"the database did not answer within {limit}"
        if isinstance(exc, errors.InsufficientPrivilege):
            return (
                f"{text} (the role lacks a privilege: `floorctl chain init --grant ROLE` "
                f"grants {APPENDER_ROLE}_DATABASE, which may call the functions of schema "
                f"{API_SCHEMA} and nothing else; records are append-only)"
            )
        if isinstance(exc, errors.UndefinedTable | errors.InvalidSchemaName):
            return f"{text} (no floorguard chain here: run `floorctl chain init --url URL`)"
        if isinstance(exc, errors.InvalidSqlStatementName):
            return (
                f"{text} (the session lost the statements prepared when it opened: a "
                "connection pooler in transaction mode shares sessions between clients; "
                "connect to PostgreSQL directly, or pool by session)"
            )
        if isinstance(exc, errors.UniqueViolation):
            return f"{text} (another writer bypassed the chain's lock)"
        if isinstance(exc, pg.OperationalError):
            if opening and text.endswith("(its words are not shown)"):
                return text
            lowered = text.lower()
            if "timeout" in lowered:
                return f"{text} (no answer within {limit})"
            if "password" in lowered or "authentication" in lowered:
                return f"{text} (the database refused the login)"
            if "certificate" in lowered or "ssl" in lowered:
                return (
                    f"{text} (TLS: the server's certificate was not accepted, or TLS failed; "
                    "check sslmode, sslrootcert and the host name in FLOORGUARD_CHAIN_URL)"
                )
            return (
                f"{text} (the database is unreachable, the connection was lost, or the server "
                "ended the session: a waiting append ends one that holds the chain's lock past "
                "meta lock_hold_limit_ms; the server's log says which)"
            )
        return text
