"""The chain in one SQLite file (the default store, ``chain.sqlite3`` in FLOORGUARD_HOME).

WAL mode with ``synchronous=FULL``; every write is one ``BEGIN IMMEDIATE`` transaction, so
writers from many processes serialise and a write returns only once it is durable. The
file is created 0600 on the first write; reads never create it. ``sqlite3`` is imported
on first use.

An append may run ahead (``WriteView.ahead``): after an append, the store keeps what it
wrote (the head record, and the tree nodes the next leaf is hashed with) with the
connection's ``PRAGMA data_version`` read under that append's lock. The next append on the
same connection takes the lock and reads the data version, and when it is unchanged (no
other connection, of this process or any other, or of another host sharing the file, has
committed to it since: SQLite changes the data version on every such commit) answers the
append's reads from what it kept (the head among them: the file holds it, as far as SQLite
can tell), and writes the record and its tree nodes in two statements (the nodes' prepared
once, run once a node). Anything else (another writer, a checkpoint, another connection
after a fork or a replaced file, a read it cannot answer) runs the append the ordinary way
in the same transaction, reading the head and the tree from the file.

The data version sees commits made through one log. Before each append the kept connection
is checked to still be on the files it opened: the database (a file replaced under its name
gets a new connection), with one name only (SQLite keeps a log beside each name: a hard link
would be a second log), and the same ``-wal`` and ``-shm`` (removed or replaced under the
connection, another writer would open new ones: every further append is refused).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from floorguard._base.folders import make_private_folder
from floorguard.chainstore.interface import (
    CHAIN_FORMAT,
    NODE_ORDER,
    AheadMissed,
    AheadView,
    FirstReads,
    Node,
    Row,
    T,
    WriteView,
    edge_of,
    ending_query,
    stray_query,
)
from floorguard.errors import ChainError, ChainWriteError, KeyFileError

if TYPE_CHECKING:
    import sqlite3

BUSY_TIMEOUT_SECONDS = 30.0
READER_CACHE_KIB = 512
_PAIRS_A_QUERY = 200  # lookups in one statement, under SQLite's 500 compound SELECTs
COLUMNS = "seq, ts, chain_id, event, receipt_id, receipt, prev, mac"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS records ("
    " seq INTEGER PRIMARY KEY, ts TEXT NOT NULL, chain_id TEXT NOT NULL, event TEXT NOT NULL,"
    " receipt_id TEXT NOT NULL, receipt TEXT NOT NULL, prev TEXT NOT NULL, mac TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tree (level INTEGER NOT NULL, idx INTEGER NOT NULL,"
    " hash BLOB NOT NULL, PRIMARY KEY (level, idx)) WITHOUT ROWID",
)


# Under a write's lock: the connection's data version, what every write rests on (the file
# as this connection last checked it, while no other connection has committed since) and an
# append run ahead. The head is not read with it: while the version is unchanged, the file
# holds what this connection last committed as far as SQLite can tell (it keeps the pages it
# read, and a read of the head gives its own last write: the head it kept). 2.4 us in place,
# against 10.1 us for one statement reading the version and the head's seq and mac.
_WRITE_CHECK = "PRAGMA data_version"
_MAC_OF_SEQ = "SELECT mac FROM records WHERE seq = ?"
_SCHEMA_OBJECTS = "SELECT type, name FROM sqlite_master"
# The format's rows: exactly one, stating CHAIN_FORMAT (a meta table rebuilt without its
# primary key may state two, the first of them this format).
_FORMAT_READ = "SELECT value FROM meta WHERE key = 'format' LIMIT 2"


def _stated_format(rows: list[Any]) -> object:
    """What the format rows state: the value of the only one, else the values of all."""
    return rows[0][0] if len(rows) == 1 else [row[0] for row in rows] or None


# What floorguard makes in a chain's file (SQLite's own tables, sqlite_*, aside).
_OWN_OBJECTS: Final = frozenset(
    {("table", "meta"), ("index", "sqlite_autoindex_meta_1"), ("table", "records"),
     ("table", "tree")}
)  # fmt: skip


_ROW_TYPES = (int, str, str, str, str, str, str, str)


def _record(row: Any) -> Row:
    """A stored row as a record: its seq an integer, every other field text. Anything else
    (a BLOB, a number where the column's affinity kept one) is an altered database, refused
    in words before any of it is hashed, formatted or compared."""
    if tuple(map(type, row)) != _ROW_TYPES:  # (in C: a third of a generator's time)
        raise ChainWriteError(
            f"record {row[0]!r} holds a value that is not text (the database was altered)"
        )
    record: Row = row
    return record


def _unknown_format(db_path: Path, stored: object) -> str:
    return (
        f"cannot open the audit chain {db_path}: unknown format {stored!r} (this floorguard "
        f"reads and writes format {CHAIN_FORMAT} only)"
    )


def _foreign(objects: Iterable[tuple[object, object]]) -> str | None:
    """Why a chain's file holding ``objects`` (type, name) is not one floorguard wrote, or
    None: a trigger runs inside every write (it can drop or rewrite what was stored, in the
    writer's own commit, unseen by its data version), a view can stand for a table, and
    anything else was made by someone else."""
    found = [
        f"{kind} {name!s}"
        for kind, name in objects
        if (kind, name) not in _OWN_OBJECTS
        and not (kind == "table" and isinstance(name, str) and name.startswith("sqlite_"))
    ]
    if not found:
        return None
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return (
        f"it holds {shown}, which floorguard does not make (a trigger or a view acts inside "
        "every read or write of the chain; the database was altered)"
    )


# An append's own nodes (at most 64: its leaf and the subtrees it completes), as opposed to
# a whole tree built for an old chain, which a write view does not keep.
_NODES_OF_AN_APPEND = 64
# One prepared statement run once per node (executemany): 8.4 us for an append's nodes in
# place, against 10.8 us for one INSERT of them all (its VALUES rows bound anew each time).
_INSERT_NODE = "INSERT INTO tree (level, idx, hash) VALUES (?, ?, ?)"
_INSERT_RECORD = f"INSERT INTO records ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"  # noqa: S608


@functools.cache  # (at most _PAIRS_A_QUERY texts: building one costs a proof a microsecond)
def _subtrees_query(count: int) -> str:
    """The hashes of ``count`` (level, idx) pairs in one statement, a row for each pair in
    the order given (NULL for a pair the tree lacks): the pairs as a VALUES table, the
    outer loop of a LEFT JOIN on the tree's primary key, so each pair is one seek. Half
    the time of a compound SELECT of ``count`` lookups (26 against 54 us for the 22 nodes
    of a proof at 100,000 records); a row-value IN scans the whole tree. Only the hash is
    returned: each column a row returns costs more than the seek."""
    pairs = ",".join(["(?,?)"] * count)
    return (
        f"WITH wanted(level, idx) AS (VALUES {pairs}) SELECT tree.hash"  # noqa: S608 (placeholders only)
        " FROM wanted LEFT JOIN tree ON tree.level = wanted.level AND tree.idx = wanted.idx"
    )


class _View:
    """ReadView and WriteView over one SQLite connection inside a transaction."""

    ahead = False

    def __init__(
        self,
        conn: sqlite3.Connection | sqlite3.Cursor,
        has_tree: bool = True,
        seen: _ReaderSeen | None = None,
    ) -> None:
        # (a cursor only where no statement's rows are read while another runs: the run-ahead
        # write, one statement after the other)
        self._conn = conn
        self._has_tree = has_tree
        self._seen = seen  # (a read on the kept connection: what it found at this version)

    def record_count(self) -> int:
        # Records are seq 0..n-1 (append makes them so; count(*) would scan the table).
        row = self._conn.execute("SELECT max(seq) FROM records").fetchone()
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    def head(self) -> Row | None:
        row = self._conn.execute(
            f"SELECT {COLUMNS} FROM records ORDER BY seq DESC LIMIT 1"  # noqa: S608
        ).fetchone()
        return None if row is None else _record(row)

    def row(self, seq: int) -> Row | None:
        row = self._conn.execute(
            f"SELECT {COLUMNS} FROM records WHERE seq = ?",  # noqa: S608
            (seq,),
        ).fetchone()
        return None if row is None else _record(row)

    def ts_at(self, seq: int) -> str | None:
        row = self._conn.execute("SELECT ts FROM records WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else str(row[0])

    def extent(self) -> tuple[int, int, str | None]:
        seen = self._seen
        if seen is not None:
            if seen.extent is None:
                seen.extent = self._read_extent()
            return seen.extent
        return self._read_extent()

    def _read_extent(self) -> tuple[int, int, str | None]:
        tree = "(SELECT max(idx) FROM tree WHERE level = 0)" if self._has_tree else "NULL"
        row = self._conn.execute(
            f"SELECT (SELECT max(seq) FROM records), {tree},"  # noqa: S608
            " (SELECT chain_id FROM records WHERE seq = 0)"
        ).fetchone()
        records, leaves, chain_id = row
        if chain_id is not None and type(chain_id) is not str:
            raise ChainWriteError("record 0 holds a chain id that is not text (the database "
                                  "was altered)")  # fmt: skip
        return (
            0 if records is None else int(records) + 1,
            0 if leaves is None else int(leaves) + 1,
            None if chain_id is None else str(chain_id),
        )

    def chain_id_at(self, seq: int) -> str | None:
        row = self._conn.execute("SELECT chain_id FROM records WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else str(row[0])

    def rows(self, first: int, last: int | None) -> Iterator[Row]:
        if last is None:
            cursor = self._conn.execute(
                f"SELECT {COLUMNS} FROM records WHERE seq >= ? ORDER BY seq",  # noqa: S608
                (first,),
            )
        else:
            cursor = self._conn.execute(
                f"SELECT {COLUMNS} FROM records WHERE seq BETWEEN ? AND ? "  # noqa: S608
                "ORDER BY seq",
                (first, last),
            )
        while batch := cursor.fetchmany(512):
            for row in batch:
                yield _record(row)

    def first_seq_of(self, receipt_id: str) -> int | None:
        row = self._conn.execute(
            "SELECT min(seq) FROM records WHERE receipt_id = ?", (receipt_id,)
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def tree_size(self) -> int:
        if not self._has_tree:
            return 0
        row = self._conn.execute("SELECT max(idx) FROM tree WHERE level = 0").fetchone()
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    def subtree(self, level: int, index: int) -> bytes | None:
        if not self._has_tree:
            return None
        row = self._conn.execute(
            "SELECT hash FROM tree WHERE level = ? AND idx = ?", (level, index)
        ).fetchone()
        return None if row is None or not isinstance(row[0], bytes) else bytes(row[0])

    def nodes(self) -> Iterator[Node]:
        if not self._has_tree:
            return
        cursor = self._conn.execute(f"SELECT level, idx, hash FROM tree {NODE_ORDER}")  # noqa: S608
        while batch := cursor.fetchmany(512):
            yield from batch

    def subtrees(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        found: dict[tuple[int, int], bytes] = {}
        if not self._has_tree:
            return found
        for start in range(0, len(keys), _PAIRS_A_QUERY):
            chunk = keys if len(keys) <= _PAIRS_A_QUERY else keys[start : start + _PAIRS_A_QUERY]
            params = list(itertools.chain.from_iterable(chunk))
            rows = self._conn.execute(_subtrees_query(len(chunk)), params).fetchall()
            if len(rows) != len(chunk):  # (one row a pair: a LEFT JOIN on a primary key)
                raise ChainError("the tree's lookup returned a row too many or few")
            # (a BLOB; NULL or anything else is no hash)
            found.update(
                [
                    (key, row[0])
                    for key, row in zip(chunk, rows, strict=True)
                    if type(row[0]) is bytes
                ]
            )
        return found

    def subtrees_and_row(
        self, keys: Sequence[tuple[int, int]], seq: int
    ) -> tuple[dict[tuple[int, int], bytes], Row | None]:
        return self.subtrees(keys), self.row(seq)

    def nodes_ending(self, after: int, upto: int) -> Iterator[Node]:
        if not self._has_tree:
            return
        query, params = ending_query("tree", after, upto, "?")
        cursor = self._conn.execute(query, params)
        while batch := cursor.fetchmany(512):
            yield from batch

    def stray_node(self, size: int) -> tuple[int, int] | None:
        if not self._has_tree:
            return None
        query, params = stray_query("tree", size, "?")
        row = self._conn.execute(query, params).fetchone()
        return None if row is None else (row[0], row[1])

    def clock(self) -> None:
        return None  # one machine: its own clock is the chain's

    def meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def insert_meta(self, key: str, value: str) -> None:
        self._conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))

    def insert_record(self, row: Row) -> None:
        done = self._conn.execute(_INSERT_RECORD, row)
        if done.rowcount != 1:  # (what stored nothing, and said nothing, is no write)
            raise ChainWriteError(f"record {row[0]} was not stored (the database was altered)")

    def insert_nodes(self, nodes: Iterable[Node]) -> None:
        import sqlite3  # loaded already: the view's connection is one of its

        rows = nodes if isinstance(nodes, list) else list(nodes)
        try:
            stored = self._conn.executemany(_INSERT_NODE, rows).rowcount if rows else 0
        except sqlite3.IntegrityError as exc:
            # Only a row written for a record that did not exist yet can be in the way.
            raise ChainWriteError(
                "the Merkle tree holds subtrees of records not yet appended"
            ) from exc
        if stored != len(rows):
            raise ChainWriteError(
                f"{len(rows) - stored} of {len(rows)} tree nodes were not stored (the database "
                "was altered)"
            )


class _WriteView(_View):
    """A write transaction's view, which keeps the tree nodes it read and wrote and the
    records it inserted (for ``_Known.after``)."""

    rereads_meta = True

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self.nodes_seen: dict[tuple[int, int], bytes] = {}
        self.inserted: list[Row] = []

    def subtree(self, level: int, index: int) -> bytes | None:
        found = super().subtree(level, index)
        if found is not None:
            self.nodes_seen[(level, index)] = found
        return found

    def insert_record(self, row: Row) -> None:
        super().insert_record(row)
        self.inserted.append(row)

    def insert_nodes(self, nodes: Iterable[Node]) -> None:
        rows = list(nodes)
        super().insert_nodes(rows)
        if len(rows) <= _NODES_OF_AN_APPEND:  # (an append's; not a whole tree built)
            self.nodes_seen.update(((level, index), digest) for level, index, digest in rows)


class _ReaderSeen:
    """What the kept read connection found at one data version: the file floorguard's own
    (its schema objects checked), whether it has a tree, and once read, its extent. While
    no other connection commits the version stays and so does all of it (the connection
    only reads): a read at that version starts with one pragma, not two queries."""

    __slots__ = ("extent", "has_tree", "version")

    def __init__(self, version: object, has_tree: bool) -> None:
        self.version = version
        self.has_tree = has_tree
        self.extent: tuple[int, int, str | None] | None = None


class _Known:
    """What this process knows of the chain after its last append on its kept connection:
    the record it wrote (the head while no other connection commits), the tree nodes its
    next append reads (the new leaf and the right edge of the tree with it), and the
    connection's data version read under that append's lock (unchanged by the connection's
    own commits)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        version: int,
        head: Row,
        nodes: dict[tuple[int, int], bytes],
    ) -> None:
        self.conn = conn
        self.version = version
        self.head = head
        self.nodes = nodes

    def holds(self, conn: sqlite3.Connection, version: object) -> bool:
        """Whether this is still the chain on ``conn``, which read ``version`` under its
        write lock: no other connection committed since."""
        return conn is self.conn and type(version) is int and version == self.version

    @classmethod
    def after(
        cls,
        conn: sqlite3.Connection,
        version: object,
        inserted: list[Row],
        seen: dict[tuple[int, int], bytes],
    ) -> _Known | None:
        """After an append that inserted ``inserted`` (exactly one record) and read or wrote
        the nodes ``seen``; None when it was no single append or a needed node is unknown."""
        if len(inserted) != 1 or not isinstance(version, int) or isinstance(version, bool):
            return None
        head = inserted[0]
        size = head[0] + 1
        wanted = [(0, size - 1)]
        wanted += [(level, (size >> level) - 1) for level in range(size.bit_length())
                   if size >> level & 1]  # fmt: skip
        nodes = {}
        for key in wanted:
            found = seen.get(key)
            if found is None:
                return None
            nodes[key] = found
        return cls(conn, version, head, nodes)


class _AheadView(AheadView):
    """A WriteView running ahead on a _Known checked under the lock (nothing is written
    until the attempt returns)."""

    def edge(self, size: int) -> list[bytes]:
        # (the kept nodes looked up directly, not through three calls a node: no read
        # here is recorded, unlike a store's that sends what it read to be checked)
        return edge_of(size, self._known.nodes.get)


class SqliteStore:
    """The chain in the SQLite file ``db_path``.

    Constructing one touches nothing on disk; the first write creates the folder (0700)
    and the database (0600). The write connection is cached and reopened after a fork or
    when the file was replaced.
    """

    creates_key = True
    write_budget: float | None = None
    stamp_slack_seconds = 0.0  # (stamped inside the write transaction, from this clock)

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self.location = str(self.db_path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        # One cursor of the kept connection for the statements of an append (each
        # conn.execute makes a new one): BEGIN, the check, the run-ahead write, COMMIT.
        self._cursor: sqlite3.Cursor | None = None
        self._conn_pid = 0
        # The identities of the file and its log and index when the connection was opened.
        self._conn_files: _Files = (None, None, None)
        # The size of the log after this process's last commit through the kept connection,
        # and the (seq, mac) of the last record this process committed.
        self._log_size = 0
        self._last_written: tuple[int, str] | None = None
        # Why this process writes nothing more to the file (records it wrote were lost).
        self._lost: str | None = None
        # What the last append on the kept connection wrote (appending ahead), or None.
        self._known: _Known | None = None
        # The data version at which the kept connection last found the file floorguard's
        # own (its tables only, its format): unchanged while no other connection commits.
        self._checked_version: object = None
        # One read connection kept between reads (opening one, and SQLite's reading of the
        # schema on its first statement, cost more than a proof's queries): for one read
        # at a time, in this process, on this file; a read meanwhile opens its own.
        self._reader_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        self._reader_key: tuple[int, tuple[int, int] | None] | None = None
        self._reader_seen: _ReaderSeen | None = None

    def exists(self) -> bool:
        return self.db_path.is_file()

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
        with self._reader_lock:
            self._drop_reader()

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
        # known_size is ignored: a lookup in a local file costs no round trip; so is
        # deadline (no budget: SQLite's busy timeout bounds each wait). ``ahead``: see the
        # module's docstring.
        def once() -> T:
            conn = self._writer()
            statements = self._cursor or conn.cursor()
            known, self._known = self._known, None
            try:
                statements.execute("BEGIN IMMEDIATE")
                (version,) = statements.execute(_WRITE_CHECK).fetchone()
                if version != self._checked_version:
                    # Another connection committed since this one last looked (or it never
                    # did): what it may have planted or changed is looked for first.
                    self._check_file(conn, doing)
                    self._checked_version = version
                if ahead and known is not None and known.holds(conn, version):
                    ran = _run_ahead(conn, statements, known, attempt)
                    if ran is not None:
                        result, self._known = ran
                        statements.execute("COMMIT")
                        self._committed(self._known.head if self._known else None)
                        return result
                view = _WriteView(conn)
                result = attempt(view)
                if ahead:
                    # (the version read under this lock: this connection's own commit
                    # leaves it as it is)
                    self._known = _Known.after(conn, version, view.inserted, view.nodes_seen)
                conn.execute("COMMIT")
                self._committed(view.inserted[-1] if view.inserted else None)
            except BaseException:
                self._known = None
                _rollback_quietly(conn)
                # A connection that failed may be in any state: start the next try afresh.
                self._drop_connection()
                raise
            return result

        with self._lock:
            return self._with_busy_retry(once, doing)

    def _committed(self, last: Row | None) -> None:
        """After a commit on the kept connection that wrote ``last`` (None: no record)."""
        self._log_size = _log_size(self.db_path)
        if last is not None:
            self._last_written = (last[0], last[7])

    def _check_file(self, conn: sqlite3.Connection, doing: str) -> None:
        """Refuse a file that holds anything floorguard does not make (a trigger runs inside
        every write, in the writer's own commit, where its data version does not see it) or
        a format this floorguard does not write. Raises ChainWriteError."""
        foreign = _foreign(conn.execute(_SCHEMA_OBJECTS).fetchall())
        if foreign:
            raise ChainWriteError(f"cannot {doing} the audit chain {self.db_path}: {foreign}")
        stated = _stated_format(conn.execute(_FORMAT_READ).fetchall())
        if stated != CHAIN_FORMAT:
            raise ChainWriteError(_unknown_format(self.db_path, stated))

    def _with_busy_retry(self, attempt: Callable[[], T], doing: str) -> T:
        """Run ``attempt``, retrying while SQLite reports the database busy.

        The busy timeout covers most waits, but SQLite returns SQLITE_BUSY at once in a few
        cases (recovering the WAL of a killed process, changing the journal mode), so those
        are retried here until the same deadline. Storage errors become ChainWriteError.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        pause = 0.001
        while True:
            try:
                return attempt()
            except (KeyFileError, ChainWriteError):
                raise
            except Exception as exc:
                if not _is_storage_error(exc):
                    raise
                if _is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.05)
                    continue
                raise ChainWriteError(
                    f"cannot {doing} the audit chain {self.db_path}: {_explain(exc)}"
                ) from exc

    def _writer(self) -> sqlite3.Connection:
        """The cached write connection, reopened after a fork or if the file was replaced.

        Raises sqlite3.Error or OSError (``write`` translates them) and ChainWriteError.
        """
        if self._lost is not None:
            raise ChainWriteError(self._lost)
        if self._conn is not None:
            if self._conn_pid == os.getpid():
                files = _files(self.db_path)
                if _same_file(files[0], self._conn_files[0]):
                    _refuse_more_names(self.db_path, files)
                    _refuse_another_log(self.db_path, self._conn_files, files)
                    if not _shorter_log(self._log_size, files[1]):
                        return self._conn
                    return self._reopened_after_a_shorter_log()
            self._drop_connection()
        return self._reopened()

    def _reopened(self) -> sqlite3.Connection:
        conn = self._open_writer()
        self._conn = conn
        self._cursor = conn.cursor()
        self._checked_version = None  # (this connection has not checked the file yet)
        self._conn_pid = os.getpid()
        self._conn_files = _files(self.db_path)
        return conn

    def _reopened_after_a_shorter_log(self) -> sqlite3.Connection:
        """A new connection, once the log was found shorter than this process's last commit
        left it (``_shorter_log``): the record this process last wrote must still be read
        there, as written, by the new connection. Raises ChainWriteError."""
        written = self._last_written
        self._drop_connection()
        conn = self._reopened()
        found = conn.execute(_MAC_OF_SEQ, (written[0],)).fetchone() if written else None
        if written is not None and (found is None or found[0] != written[1]):
            self._drop_connection()
            self._lost = (
                f"cannot append to the audit chain {self.db_path}: its {self.db_path.name}-wal "
                f"was cut while this process had it open, and record {written[0]}, which "
                "this process wrote, is gone with it: the chain lost records; nothing more is "
                "written to it by this process: restart it, and leave SQLite's -wal and -shm "
                "files alone while the chain is in use"
            )
            raise ChainWriteError(self._lost)
        return conn

    def _open_writer(self) -> sqlite3.Connection:
        import sqlite3

        home = self.db_path.parent
        if home.exists() and not home.is_dir():
            raise ChainWriteError(
                f"cannot open the audit chain: {home} is not a folder (set FLOORGUARD_HOME "
                "to a folder, or remove the file)"
            )
        make_private_folder(home)
        if self.db_path.is_dir():
            raise ChainWriteError(
                f"cannot open the audit chain: {self.db_path} is a folder, not a database"
            )
        # The file is never opened here once it exists: SQLite's locks on it are POSIX locks,
        # and closing any descriptor of it would let go of every one this process holds (its
        # kept reader's among them), so another process closing the chain would take itself
        # for the last and remove the log this process still uses. Looked at instead (a FIFO
        # or device there is refused by name, not waited on), and created, 0600 (SQLite
        # gives its -wal and -shm files the same mode), only when absent: no connection of
        # this process can hold a lock on a file that did not exist.
        try:
            info = os.stat(self.db_path)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):  # (another got there first)
                os.close(os.open(self.db_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                                 0o600))  # fmt: skip
            info = os.stat(self.db_path)
        if not stat.S_ISREG(info.st_mode):
            raise ChainWriteError(
                f"cannot open the audit chain: {self.db_path}: not a regular file"
            )
        _refuse_more_names(self.db_path, ((info.st_dev, info.st_ino, info.st_nlink, info.st_size),))
        _refuse_odd_companions(self.db_path, ChainWriteError)
        conn = sqlite3.connect(
            self.db_path,
            timeout=BUSY_TIMEOUT_SECONDS,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            if mode is not None and str(mode[0]).lower() != "wal":
                # Only the first opener switches the mode (it needs an exclusive lock).
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise ChainWriteError(
                    f"cannot open the audit chain {self.db_path}: WAL mode is unavailable"
                )
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Only a file holding nothing yet is made a chain of this format: one whose
                # format row is gone (or its meta table) is not given one back.
                new = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
                for statement in _SCHEMA:
                    conn.execute(statement)
                if new:
                    conn.execute(
                        "INSERT INTO meta (key, value) VALUES ('format', ?)", (CHAIN_FORMAT,)
                    )
                stated = _stated_format(conn.execute(_FORMAT_READ).fetchall())
                if stated != CHAIN_FORMAT:
                    raise ChainWriteError(_unknown_format(self.db_path, stated))
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise
        except BaseException:
            conn.close()
            raise
        return conn

    def _drop_connection(self) -> None:
        self._known = None
        if self._conn is not None:
            with contextlib.suppress(Exception):  # it may already have failed
                self._conn.close()
        self._conn = None
        self._cursor = None
        self._conn_files = (None, None, None)
        self._log_size = 0

    # -- reading --

    @contextlib.contextmanager
    def read(self, first: FirstReads | None = None) -> Iterator[_View | None]:
        """As ChainStore.read (``first`` is for a store a round trip away)."""
        import sqlite3

        try:
            info = os.stat(self.db_path)
        except (FileNotFoundError, NotADirectoryError):
            yield None
            return
        except OSError as exc:
            raise ChainError(
                f"cannot read the audit chain {self.db_path}: {_explain(exc)}"
            ) from exc
        if not stat.S_ISREG(info.st_mode):
            raise ChainError(f"cannot read the audit chain: {self.db_path} is not a file")
        kept = self._reader_lock.acquire(blocking=False)
        try:
            conn = self._kept_reader((info.st_dev, info.st_ino)) if kept else None
            if conn is None:
                _refuse_odd_companions(self.db_path, ChainError)
                conn = self._open_reader()
                if kept:
                    self._reader = conn
                    self._reader_key = (os.getpid(), (info.st_dev, info.st_ino))
            ok = False
            try:
                try:
                    # One read transaction: everything read comes from one snapshot (the
                    # pragma, the first statement of a kept connection's read, starts it).
                    conn.execute("BEGIN")
                    version, seen = self._seen_as_before(conn) if kept else (None, None)
                    if seen is None:
                        objects = conn.execute(_SCHEMA_OBJECTS).fetchall()
                except sqlite3.Error as exc:
                    raise ChainError(
                        f"cannot read the audit chain {self.db_path}: {_explain(exc)}"
                    ) from exc
                if seen is None:
                    foreign = _foreign(objects)
                    if foreign:
                        raise ChainError(f"cannot read the audit chain {self.db_path}: {foreign}")
                    tables = {name for kind, name in objects if kind == "table"}
                    if "records" in tables:
                        # Records are read as this format lays them out: a file that does
                        # not say it is in this format is not read as if it were.
                        try:
                            rows = conn.execute(_FORMAT_READ).fetchall() if "meta" in tables else []
                        except sqlite3.Error as exc:
                            raise ChainError(
                                f"cannot read the audit chain {self.db_path}: {_explain(exc)}"
                            ) from exc
                        stated = _stated_format(rows)
                        if stated != CHAIN_FORMAT:
                            raise ChainError(_unknown_format(self.db_path, stated))
                        seen = _ReaderSeen(version, "tree" in tables)
                        if kept:
                            self._reader_seen = seen
                if seen is None:
                    # A database with no records table yet is an empty chain, nothing more.
                    yield None
                else:
                    try:
                        yield _View(conn, has_tree=seen.has_tree, seen=seen)
                    except Exception as exc:
                        if _is_storage_error(exc):
                            raise ChainError(
                                f"cannot read the audit chain {self.db_path}: {_explain(exc)}"
                            ) from exc
                        raise
                # The snapshot ends here (a kept connection must not pin the WAL).
                conn.execute("COMMIT")
                ok = True
            finally:
                if not kept:
                    conn.close()
                elif not ok:
                    self._drop_reader()
        finally:
            if kept:
                self._reader_lock.release()

    def _seen_as_before(self, conn: sqlite3.Connection) -> tuple[object, _ReaderSeen | None]:
        """The kept connection's data version, read as its snapshot begins, and what it
        found when it last read this file if no other connection has committed since (the
        version is unchanged)."""
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        seen = self._reader_seen
        if seen is None or seen.version != version:
            self._reader_seen = None
            return version, None
        return version, seen

    def _kept_reader(self, inode: tuple[int, int]) -> sqlite3.Connection | None:
        """The kept read connection (under ``_reader_lock``) when it was opened in this
        process on this very file (its companions were checked then, and SQLite keeps
        them open); else None, the kept one closed."""
        if self._reader is not None and self._reader_key == (os.getpid(), inode):
            return self._reader
        self._drop_reader()
        return None

    def _open_reader(self) -> sqlite3.Connection:
        import sqlite3

        uri = self.db_path.absolute().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(
                uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None,
                check_same_thread=False,
            )  # fmt: skip
            # Proofs read a few nodes each, all over a large tree. A small page cache keeps
            # the pages every proof reads (the tree's upper levels, the indexes' inner
            # pages) and recycles the rest: a large one grows into fresh memory, whose page
            # faults cost a proof of a record not read before more than the cache saves one
            # read again (1M records: 103-107 against 129-159 us; 99-103 against 89-99).
            # (Not mmap: a file truncated under it would SIGBUS the reader.)
            try:
                conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
            except BaseException:
                conn.close()
                raise
            return conn
        except sqlite3.Error as exc:
            raise ChainError(
                f"cannot read the audit chain {self.db_path}: {_explain(exc)}"
            ) from exc

    def _drop_reader(self) -> None:
        if self._reader is not None:
            with contextlib.suppress(Exception):
                self._reader.close()
        self._reader = None
        self._reader_key = None
        self._reader_seen = None


def _run_ahead(
    conn: sqlite3.Connection,
    statements: sqlite3.Cursor,
    known: _Known,
    attempt: Callable[[WriteView], T],
) -> tuple[T, _Known | None] | None:
    """``attempt`` run ahead on ``known`` (checked under this transaction's lock), and its
    record and nodes written through ``statements`` (a cursor of ``conn``); with what is
    known after it. None when it missed (nothing was written: the caller runs it the
    ordinary way in the same transaction)."""
    view = _AheadView(known)
    try:
        result = attempt(view)
    except AheadMissed:
        return None
    record, nodes = view.record, view.new_nodes
    if record is None or nodes is None:
        # An attempt that wrote no record (or no tree) ahead: run it the ordinary way.
        return None
    # (a plain view: what it wrote is known here, and need not be collected as it goes)
    written = _View(statements)
    written.insert_record(record)
    written.insert_nodes(nodes)
    seen = dict(known.nodes)
    seen.update(((level, index), digest) for level, index, digest in nodes)
    return result, _Known.after(conn, known.version, [record], seen)


# A hot journal that a read-only connection would have to roll back first.
_SQLITE_READONLY_ROLLBACK: Final = 776
# A read that found fewer bytes than the file's index (the -shm) promised.
_SQLITE_IOERR_SHORT_READ: Final = 522


def _explain(error: BaseException) -> str:
    """A reason a person can act on, from an sqlite3 or OS error."""
    text = str(error)
    lowered = text.lower()
    if getattr(error, "sqlite_errorcode", None) == _SQLITE_IOERR_SHORT_READ:
        return (
            f"{text} (the file or its -wal is shorter than SQLite's index of it says: it was "
            "cut while the chain was in use, and what was written there is lost)"
        )
    if getattr(error, "sqlite_errorcode", None) == _SQLITE_READONLY_ROLLBACK:
        return (
            f"{text} (a rollback journal, the file's -journal, lies beside it: a writer was "
            "stopped mid-write in rollback mode, which floorguard never uses, or the file was "
            "put there; a reader may not roll it back, and the next append will)"
        )
    if "readonly" in lowered or "read-only" in lowered:
        return f"{text} (the database or its folder is read-only)"
    if "disk is full" in lowered or "disk i/o error" in lowered:
        return f"{text} (the disk may be full, or a file size limit was reached)"
    if "not a database" in lowered or "malformed" in lowered:
        return f"{text} (the file is corrupt or is not a floorguard chain; it was left as is)"
    if "locked" in lowered or "busy" in lowered:
        return f"{text} (another process held the chain for more than {BUSY_TIMEOUT_SECONDS:g}s)"
    if "unable to open" in lowered:
        return f"{text} (check that the folder exists, is writable, and is not a file)"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return text


def _is_storage_error(exc: BaseException) -> bool:
    import sqlite3

    return isinstance(exc, sqlite3.Error | OSError)


def _is_busy(exc: BaseException) -> bool:
    import sqlite3

    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        # SQLITE_BUSY and SQLITE_LOCKED, with their extended codes.
        return code & 0xFF in (5, 6)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


# (device, inode, links, size) of the database, its write-ahead log and the log's index;
# None for one that is not there.
_Identity = tuple[int, int, int, int] | None
_Files = tuple[_Identity, ...]


def _identity(path: str | Path) -> _Identity:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_nlink, info.st_size)


def _files(db_path: Path) -> _Files:
    db, log, index = _names(db_path)
    return (_identity(db), _identity(log), _identity(index))


@functools.lru_cache(maxsize=16)
def _names(db_path: Path) -> tuple[str, str, str]:
    """The database's name and those of its log and index, as text (made once a path)."""
    return (str(db_path), f"{db_path}-wal", f"{db_path}-shm")


def _refuse_more_names(db_path: Path, files: _Files) -> None:
    """SQLite keeps a database's log and index beside the name it was opened by: a file with
    a second name (a hard link) would get a second log, and two writers two heads."""
    if files[0] is not None and files[0][2] > 1:
        raise ChainWriteError(
            f"cannot append to the audit chain {db_path}: the file has {files[0][2]} hard links, "
            "and SQLite keeps a separate log beside each name (two logs: two heads, and the "
            "records of one lost); remove the other names"
        )


def _same_file(now: _Identity, before: _Identity) -> bool:
    """Whether two identities are of one file with as many names (its size may differ)."""
    return now is None if before is None else now is not None and now[:3] == before[:3]


def _log_size(db_path: Path) -> int:
    """The size of the database's write-ahead log now (0: none)."""
    try:
        return os.stat(_names(db_path)[1]).st_size
    except OSError:
        return 0


def _shorter_log(left: int, now: _Identity) -> bool:
    """Whether the log is shorter than this process's last commit left it. SQLite adds to
    it while connections have it open, reusing it from its start after a checkpoint, and
    only a truncating checkpoint shortens it; so does someone cutting it in place, and with
    it the records committed there, which the kept connection would go on reading from its
    index as if they were there: the file is then read afresh, and the head and tree that
    this host remembers checked against it, by a new connection."""
    return now is not None and now[3] < left


def _refuse_another_log(db_path: Path, opened: _Files, now: _Files) -> None:
    """The kept connection holds the log and index it opened, even once they are removed: a
    log removed or replaced under it means another writer may now append on a new log (and
    the removed one's records would be lost), so nothing more is written through it."""
    for suffix, before, after in zip(("-wal", "-shm"), opened[1:], now[1:], strict=True):
        if before is not None and (after is None or after[:2] != before[:2]):
            raise ChainWriteError(
                f"cannot append to the audit chain {db_path}: its {db_path.name}{suffix} was "
                "removed or replaced while this process had it open (another writer could now "
                "append on another log); nothing more is written through it: restart this "
                "process, and leave SQLite's -wal and -shm files alone while the chain is in use"
            )


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    # After a failed COMMIT SQLite may already have rolled back; the first error is the news.
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except Exception:  # noqa: S110
        pass


# SQLite opens these beside the database with blocking calls: a FIFO planted at one of
# them would hang every decision, so anything there but a regular file is refused by name.
_COMPANIONS = ("-wal", "-shm", "-journal")


def _refuse_odd_companions(db_path: Path, error: type[ChainError]) -> None:
    for suffix in _COMPANIONS:
        companion = f"{db_path}{suffix}"
        try:
            mode = os.lstat(companion).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise error(f"cannot open the audit chain: {companion}: {exc.strerror}") from exc
        if not stat.S_ISREG(mode):
            raise error(f"cannot open the audit chain: {companion}: not a regular file")
