"""The chain in a PostgreSQL database shared by many hosts (``FLOORGUARD_CHAIN_URL``).

psycopg 3 (the ``floorguard[postgres]`` extra) is imported only when this store is used.
The tables live in the schema ``floorguard`` (``meta``, ``records``, ``tree``, and
``append_lock``, the lock's one row), made by ``init_schema`` (``floorctl chain init --url
URL``) together with the appenders' role; a host's role needs SELECT and INSERT, and
UPDATE on ``append_lock`` to lock its row. An append is one transaction, two round trips:
BEGIN, that row locked FOR UPDATE (appenders on every host serialise on it) and the head;
then the record and its tree rows with the COMMIT, in one pipeline. The primary key on seq
and a trigger (``check_record``: the next seq, a ts between the head's and the server's
clock) hold even a modified client to that. Records take the server's clock. Commits are
synchronous (a session that the server defaults to ``synchronous_commit=off`` is switched
back on). Connect, statement, lock and idle-in-transaction timeouts are the store's
``timeout`` (``FLOORGUARD_CHAIN_TIMEOUT``, default 5 s): an unreachable server, a failed
login, a timeout or a connection lost mid-append is a ChainWriteError (the spawn is
refused), never a hang; the next append connects afresh.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import re
import secrets
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from floorguard.chainstore.interface import CHAIN_FORMAT, Node, Row, T, WriteView
from floorguard.errors import ChainError, ChainWriteError, KeyFileError

if TYPE_CHECKING:
    import psycopg

SCHEMA = "floorguard"
APPENDER_ROLE = "floorguard_appender"  # + "_" + the database's name: see appender_role


def appender_role(database: str) -> str:
    """The appenders' role of the chain in ``database``: one per database, because roles
    are cluster-wide (one shared role would let a host of one chain append to every other
    chain in the cluster). Longer than PostgreSQL's 63 bytes: "-" and a digest of the
    name; no database's own name can give that form, which the "_" of the other tells
    apart (a database named after another's digest would otherwise share its role)."""
    name = f"{APPENDER_ROLE}_{database}"
    if len(name.encode("utf-8")) <= 63:
        return name
    return f"{APPENDER_ROLE}-{hashlib.sha256(database.encode('utf-8')).hexdigest()[:40]}"


# pg_advisory_xact_lock key ("floorgd" as an integer): serialises two first `chain init`s.
LOCK_KEY = int.from_bytes(b"floorgd", "big")
COLUMNS = "seq, ts, chain_id, event, receipt_id, receipt, prev, mac"
_RECORDS = f"{SCHEMA}.records"
_TREE = f"{SCHEMA}.tree"
_META = f"{SCHEMA}.meta"
_META_VALUE = f"SELECT value FROM {_META} WHERE key = %s"  # noqa: S608
_INSTALL = "install floorguard[postgres] (psycopg 3) to use FLOORGUARD_CHAIN_URL"


# libpq parameters whose values are secrets: never echoed.
_SECRET_KEYS = frozenset({"password", "sslpassword"})
_PAIR = re.compile(r"([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']+)")


def redact(url: str) -> str:
    """``url`` without its secrets (password, sslpassword), for messages.

    Of a URL, everything up to its last "@" is the user part, and only the user name before
    its first ":" is kept: a password may hold "#", "?" or "/", which libpq reads as part of
    it but which a URL parser takes for the end of the authority (so this hides more than
    libpq would read, never less). Of a key=value string only its well-formed pairs are
    kept (a stray word could be the rest of a password with a space in it).
    """
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("postgresql", "postgres"):
        userinfo, at, after = rest.rpartition("@")
        shown = f"{userinfo.partition(':')[0]}@{after}" if at else rest
        where, _, query = shown.partition("?")
        # Keys are percent-decoded first, as libpq decodes them ("pass%77ord" is password).
        kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)
                if k.lower() not in _SECRET_KEYS]  # fmt: skip
        return f"{scheme}://{where}" + (f"?{urlencode(kept, safe='/')}" if kept else "")
    return " ".join(
        f"{key}={'***' if key in _SECRET_KEYS else value}" for key, value in _PAIR.findall(url)
    )


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _unquoted(text: str) -> str:
    # libpq's parse errors quote the offending fragment of the URL, which may be a password.
    return re.sub(r'"[^"]*"', '"..."', _one_line(text))


def _cut(conn: Any) -> None:
    """Shut ``conn``'s socket down: a call waiting on it fails at once. Never raises (it
    runs on the watchdog's thread; a connection closed meanwhile has no socket to cut)."""
    with contextlib.suppress(Exception):
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


class _Watchdog:
    """One thread per process that cuts a connection whose deadline has passed.

    The server-side timeouts end a slow statement; they cannot help when the server (or a
    box in between) goes silent while the TCP peer keeps acknowledging, and keepalives do
    not cover a Unix socket: libpq would then wait forever. One long-lived thread (a
    thread per append would double an append's cost) is armed and disarmed around each
    wait; it is woken only when a deadline comes earlier than the one it sleeps towards.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        # Also after fork: the child has neither the thread nor a usable lock.
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[Any, float, threading.Event]] = {}
        self._wake_at: float | None = None
        self._thread: threading.Thread | None = None
        self._next = 0

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for token, (conn, deadline, fired) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[token]
                        fired.set()
                        _cut(conn)
                self._wake_at = min((d for _, d, _ in self._armed.values()), default=None)
                self._cond.wait(None if self._wake_at is None else self._wake_at - now)

    @contextlib.contextmanager
    def guard(self, conn: Any, seconds: float) -> Iterator[threading.Event]:
        """Cut ``conn`` if the block outlasts ``seconds``; the event says whether it did."""
        fired = threading.Event()
        deadline = time.monotonic() + seconds
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="floorguard-chain-deadline", daemon=True
                )
                self._thread.start()
            self._next += 1
            token = self._next
            self._armed[token] = (conn, deadline, fired)
            if self._wake_at is None or deadline < self._wake_at:
                self._wake_at = deadline
                self._cond.notify()
        try:
            yield fired
        finally:
            with self._cond:
                self._armed.pop(token, None)


_WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=_WATCHDOG._reset)
_deadline = _WATCHDOG.guard


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ChainWriteError(f"cannot use the audit chain: {_INSTALL}") from exc
    return psycopg


_HEAD = f"SELECT {COLUMNS} FROM {_RECORDS} ORDER BY seq DESC LIMIT 1"  # noqa: S608
_INSERT_RECORD = f"INSERT INTO {_RECORDS} ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"  # noqa: S608
_INSERT_NODES = (
    f"INSERT INTO {_TREE} (level, idx, hash)"  # noqa: S608
    # Unqualified: unnest of several arrays is FROM-clause syntax, not a function to name
    # by schema (the session's search path is pg_catalog's anyway).
    " SELECT * FROM unnest(%s::integer[], %s::bigint[], %s::bytea[])"
)


_NO_HEAD = object()
# The server's time, and the head record (NULLs for an empty chain) with the tree nodes its
# successor's leaf will hash with, as
# "level:hex,level:hex": the head's leaf (0, seq), which says the tree is built up to the
# head, and for the new leaf n = seq + 1 each left sibling (L, (n >> L) - 1) that _add_leaf
# hashes with (one per trailing 1 bit of n, i.e. where n + 1 is a multiple of 2^(L+1)).
_HEAD_AND_NODES = (
    # The server's clock, read after the lock is granted: the time of the new record.
    "SELECT pg_catalog.to_char(pg_catalog.clock_timestamp() AT TIME ZONE 'UTC',"  # noqa: S608
    ' \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\'), r.*, ('
    "  SELECT pg_catalog.string_agg(t.level || ':' || pg_catalog.encode(t.hash, 'hex'), ',')"
    "    FROM pg_catalog.generate_series(0, 61) AS l(level)"
    f"   JOIN {_TREE} t ON t.level = l.level AND t.idx = ((r.seq + 1) >> l.level) - 1"
    "   WHERE l.level = 0 OR (r.seq + 2) % (1::bigint << (l.level + 1)) = 0"
    f") FROM (SELECT 1) AS one LEFT JOIN LATERAL ({_HEAD}) r ON true"
)
# An append's first round trip, one message: BEGIN, the chain's lock, then the head (a
# statement prepared when the connection opens: planning it each time costs more than
# running it). READ COMMITTED whatever the session's default: each statement takes its
# snapshot when it starts, so the head is read after the lock is granted (under
# REPEATABLE READ the snapshot could predate the lock, and the head be stale).
_HEAD_STATEMENT = b"floorguard_head"
# The chain's lock: its one row, locked FOR UPDATE. Only a role granted UPDATE on the
# table may take it (the appenders' and the owner's); an advisory lock would be any
# connecting role's to take and hold, stopping every append of the fleet.
LOCK_STATEMENT = f"SELECT id FROM {SCHEMA}.append_lock FOR UPDATE"  # noqa: S608
_LOCK_NAME = b"floorguard_lock"  # prepared too: planning a FOR UPDATE is not free
_LOCK_TEXT, _HEAD_TEXT = LOCK_STATEMENT.encode(), _HEAD_AND_NODES.encode()
_OPEN_APPEND = (
    "BEGIN ISOLATION LEVEL READ COMMITTED;"
    f" EXECUTE {_LOCK_NAME.decode()}; EXECUTE {_HEAD_STATEMENT.decode()}"
).encode()


@functools.cache
def _append_statement(count: int) -> tuple[bytes, bytes, tuple[int, ...]]:
    """The prepared statement inserting a record and ``count`` tree nodes: its name, its
    text (libpq's $n placeholders) and its parameters' type oids (int8, 7 x text, then
    int4, int8, bytea per node)."""
    values = ", ".join(f"(${9 + 3 * n}, ${10 + 3 * n}, ${11 + 3 * n})" for n in range(count))
    text = (
        f"WITH r AS (INSERT INTO {_RECORDS} ({COLUMNS})"  # noqa: S608
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8))"
        f" INSERT INTO {_TREE} (level, idx, hash) VALUES {values}"
    )
    types = (_INT8, *(_TEXT,) * 7, *(_INT4, _INT8, _BYTEA) * count)
    return f"floorguard_append_{count}".encode(), text.encode(), types


_INT4, _INT8, _TEXT, _BYTEA = 23, 20, 25, 17  # pg_type oids
_BINARY = 1


def _binary_params(record: Row, nodes: list[Node]) -> list[bytes]:
    """The append statement's parameters in binary format: sent with their lengths, so a
    value is never cut at a NUL byte, and the server checks the text's encoding."""
    seq, *texts = record
    values = [struct.pack(">q", seq), *(str(text).encode("utf-8") for text in texts)]
    for level, index, digest in nodes:
        values += [struct.pack(">i", level), struct.pack(">q", index), bytes(digest)]
    return values


def _parse_nodes(seq: int, text: bytes | None) -> dict[tuple[int, int], bytes]:
    """The nodes of _HEAD_AND_NODES ("level:hex,..."): keyed (level, index)."""
    nodes: dict[tuple[int, int], bytes] = {}
    for item in (text or b"").decode("ascii").split(","):
        if item:
            level, _, digest = item.partition(":")
            nodes[(int(level), ((seq + 1) >> int(level)) - 1)] = bytes.fromhex(digest)
    return nodes


class _View:
    """ReadView and WriteView over one psycopg connection inside a transaction.

    Writes are buffered until a read or the COMMIT needs them (so reads see the
    transaction's own writes); tree nodes read or written in the transaction are
    remembered. An append's record and tree rows go out as one prepared statement.
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        stream: bool = False,
        head: Any = _NO_HEAD,
        nodes: dict[tuple[int, int], bytes] | None = None,
        silence: float | None = None,
        prepared: set[bytes] | None = None,
        clock: str | None = None,
    ) -> None:
        self._conn = conn
        self._clock = clock  # the server's time when the append's head was read
        self._stream = stream
        # A reader's limit on each wait for the server (a writer's whole transaction has
        # one already); ``fired`` tells whether the last one cut the connection.
        self._silence = silence
        self.fired = threading.Event()
        self._head = head
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
        else:
            for query, params in pending:
                if query is _INSERT_NODES:  # many nodes (a tree being built): three arrays
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
        if name not in self._prepared:
            _libpq(self._conn, lambda pgconn: pgconn.prepare(name, text, types))
            self._prepared.add(name)
        params = _binary_params(record, nodes)
        formats = [_BINARY] * len(params)
        if not commit:
            _libpq(self._conn, lambda pgconn: pgconn.exec_prepared(name, params, formats))
            return

        def send(pgconn: Any) -> None:
            pgconn.send_query_prepared(name, params, formats)
            pgconn.send_query_params(b"COMMIT", None)

        _committed(_pipelined(self._conn, send, 2)[1])

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
        row = self._one(f"SELECT max(seq) FROM {_RECORDS}")  # noqa: S608
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    def head(self) -> Row | None:
        if self._head is not _NO_HEAD:
            row: Row | None = self._head
            return row
        found: Row | None = self._one(_HEAD)
        return found

    def row(self, seq: int) -> Row | None:
        row: Row | None = self._one(
            f"SELECT {COLUMNS} FROM {_RECORDS} WHERE seq = %s",  # noqa: S608
            (seq,),
        )
        return row

    def ts_at(self, seq: int) -> str | None:
        row = self._one(f"SELECT ts FROM {_RECORDS} WHERE seq = %s", (seq,))  # noqa: S608
        return None if row is None else str(row[0])

    def rows(self, first: int, last: int | None) -> Iterator[Row]:
        self.flush()
        upper = 2**63 - 1 if last is None else last
        query = f"SELECT {COLUMNS} FROM {_RECORDS} WHERE seq BETWEEN %s AND %s ORDER BY seq"  # noqa: S608
        # A read streams through a server-side cursor (an export may be millions of rows).
        cursor = (
            self._conn.cursor(name=f"floorguard_{secrets.token_hex(4)}")
            if self._stream
            else self._conn.cursor()
        )
        with cursor:
            with self._waiting():
                cursor.execute(query, (first, upper))
            while True:
                with self._waiting():  # only the wait for the server, not the consumer's
                    batch = cursor.fetchmany(512)
                if not batch:
                    break
                yield from batch

    def first_seq_of(self, receipt_id: str) -> int | None:
        row = self._one(
            f"SELECT min(seq) FROM {_RECORDS} WHERE receipt_id = %s",  # noqa: S608
            (receipt_id,),
        )
        return None if row is None or row[0] is None else int(row[0])

    def tree_size(self) -> int:
        row = self._one(f"SELECT max(idx) FROM {_TREE} WHERE level = 0")  # noqa: S608
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    def subtree(self, level: int, index: int) -> bytes | None:
        known = self._nodes.get((level, index))
        if known is not None:
            return known
        # No flush: every node written in this transaction is in _nodes, so the buffered
        # writes cannot change the answer (and the record's row stays buffered, to go out
        # with the tree's rows in one statement).
        with self._waiting():
            row = self._conn.execute(
                f"SELECT hash FROM {_TREE} WHERE level = %s AND idx = %s",  # noqa: S608
                (level, index),
            ).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

    def clock(self) -> str | None:
        return self._clock

    def meta(self, key: str) -> str | None:
        row = self._one(_META_VALUE, (key,))
        return None if row is None else str(row[0])

    def insert_meta(self, key: str, value: str) -> None:
        self._pending.append((f"INSERT INTO {_META} (key, value) VALUES (%s, %s)", (key, value)))  # noqa: S608

    def insert_record(self, row: Row) -> None:
        self._head = _NO_HEAD
        self._pending.append((_INSERT_RECORD, row))

    def insert_nodes(self, nodes: Iterable[Node]) -> None:
        batch = list(nodes)
        if batch:
            self._nodes.update(((level, idx), digest) for level, idx, digest in batch)
            self._pending.append((_INSERT_NODES, batch))


def _pipelined(conn: psycopg.Connection[Any], send: Callable[[Any], None], count: int) -> list[Any]:
    """The results of the ``count`` queries ``send`` queues on the connection's libpq handle,
    sent in one pipeline (one round trip); raised as psycopg's error when one failed.

    libpq's own wait for a pipeline's results holds the GIL, so the wait here is poll(),
    which lets the watchdog run (its cut wakes the poll: the socket reads as closed).
    """
    pg = _import_psycopg()
    pq = pg.pq
    pgconn = conn.pgconn
    results: list[Any] = []
    waiting = select.poll()
    socket_fd = pgconn.socket
    pgconn.enter_pipeline_mode()
    try:
        send(pgconn)
        pgconn.pipeline_sync()
        # psycopg's connections are non-blocking: send what the socket did not take yet,
        # reading meanwhile (a server blocked writing to us would not read either).
        waiting.register(socket_fd, select.POLLIN | select.POLLOUT)
        while pgconn.flush():
            waiting.poll()
            pgconn.consume_input()
        waiting.modify(socket_fd, select.POLLIN)
        while True:
            while pgconn.is_busy():
                waiting.poll()
                pgconn.consume_input()  # raises OperationalError once the connection is gone
            result = pgconn.get_result()
            if result is None:
                continue  # the end of one query's results
            if result.status == pq.ExecStatus.PIPELINE_SYNC:
                break
            results.append(result)
    finally:
        with contextlib.suppress(Exception):
            pgconn.exit_pipeline_mode()
    for result in results:
        _checked(pgconn, result)
    if len(results) != count:
        raise pg.OperationalError(f"{len(results)} results in the pipeline, not {count}")
    return results


def _libpq(conn: psycopg.Connection[Any], call: Callable[[Any], Any]) -> Any:
    """The result of one blocking call on the connection's libpq handle, raised as
    psycopg's error when it failed.

    The hot path of an append talks to libpq through psycopg's ``pq`` binding directly:
    psycopg's own layer measured about 100 us of CPU per statement on top. These calls
    release the GIL while they wait, so the watchdog can still cut a silent connection.
    """
    return _checked(conn.pgconn, call(conn.pgconn))


def _checked(pgconn: Any, result: Any) -> Any:
    """``result`` when its statement succeeded, else psycopg's error for it."""
    pg = _import_psycopg()
    if result.status in (pg.pq.ExecStatus.COMMAND_OK, pg.pq.ExecStatus.TUPLES_OK):
        return result
    if pgconn.status != pg.pq.ConnStatus.OK:
        # Lost mid-call: libpq's message, with no SQLSTATE to classify it by.
        raise pg.OperationalError(_one_line(result.error_message.decode("utf-8", "replace")))
    raise pg.errors.error_from_result(result, encoding="utf-8")


def _committed(result: Any) -> None:
    """A COMMIT that answered ROLLBACK (the transaction had failed) is no commit."""
    if result.command_status != b"COMMIT":
        raise _import_psycopg().OperationalError(
            f"the commit was refused ({result.command_status!r})"
        )


class PostgresStore:
    """The chain in the PostgreSQL database ``url`` (a libpq URL or key=value string).

    Constructing one connects to nothing; the write connection is opened on the first
    append, kept, and reopened after a fork or a failure. Each read uses its own
    connection, in one REPEATABLE READ snapshot.
    """

    creates_key = False

    def __init__(self, url: str, *, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.location = redact(url)
        # The client's own limit on one append (or connection setup): the server's limits
        # (each ``timeout``) fire first; this one only ends a wait on a silent server.
        self.silence = 2 * timeout
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._conn_pid = 0
        self._prepared: set[bytes] = set()  # on self._conn

    # -- connections --

    def _connect(self, error: type[ChainError], doing: str) -> psycopg.Connection[Any]:
        """A connection with every wait bounded by ``timeout``. A writer's transaction that
        stalls (a frozen process holding the chain's lock) is ended by the server after
        ``timeout``; a reader's is not, as an export may wait on a slow consumer."""
        pg = _import_psycopg()
        ms = max(1, int(self.timeout * 1000))
        try:
            params = pg.conninfo.conninfo_to_dict(self.url)
        except pg.Error as exc:
            raise error(
                f"cannot {doing} the audit chain: FLOORGUARD_CHAIN_URL is not a libpq URL "
                f"({_unquoted(exc)})"
            ) from exc
        # The operator's own settings in the URL win; these bound every wait otherwise.
        # Records are UTF-8 text, sent and read as such whatever the URL or the database
        # says (in another client encoding the server would store other characters).
        params["client_encoding"] = "UTF8"
        params.setdefault("connect_timeout", str(max(1, math.ceil(self.timeout))))
        params.setdefault("application_name", "floorguard")
        params.setdefault("tcp_user_timeout", str(ms))
        params.setdefault("keepalives", "1")
        params.setdefault("keepalives_idle", str(max(1, int(self.timeout))))
        params.setdefault("keepalives_interval", "1")
        params.setdefault("keepalives_count", "3")
        try:
            conn: psycopg.Connection[Any] = pg.connect(**params, autocommit=True)
        except pg.Error as exc:
            raise error(
                f"cannot {doing} the audit chain {self.location}: {self.explain(exc)}"
            ) from exc
        try:
            with _deadline(conn, self.silence) as fired:
                return self._configure(conn, error, doing, ms, fired)
        except BaseException:
            _close_quietly(conn)
            raise

    def _configure(
        self,
        conn: psycopg.Connection[Any],
        error: type[ChainError],
        doing: str,
        ms: int,
        fired: threading.Event,
    ) -> psycopg.Connection[Any]:
        pg = _import_psycopg()
        try:
            # The lock wait gives up a little before the statement would, so that a held
            # lock is reported as such.
            # Every name the store uses is schema-qualified; the search path is pinned as
            # well, so that no object another role creates can stand in for a built-in.
            settings = conn.execute(
                "SELECT pg_catalog.set_config('statement_timeout', %s, false),"
                " pg_catalog.set_config('lock_timeout', %s, false),"
                " pg_catalog.set_config('idle_in_transaction_session_timeout', %s, false),"
                " pg_catalog.current_setting('synchronous_commit'),"
                " pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false)",
                (str(ms), str(max(1, ms * 9 // 10)), str(ms) if error is ChainWriteError else "0"),
            ).fetchone()
            if settings is None or settings[3] == "off":
                # A decision is returned only once its record is durably committed.
                conn.execute("SET synchronous_commit = on")
        except pg.Error as exc:
            raise error(
                f"cannot {doing} the audit chain {self.location}: {self.explain(exc, fired)}"
            ) from exc
        return conn

    def _writer(self, doing: str) -> tuple[psycopg.Connection[Any], bool]:
        """The cached write connection (and whether it was just opened)."""
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
        conn = self._connect(ChainWriteError, doing)
        try:
            with _deadline(conn, self.silence) as fired:
                row = conn.execute(_META_VALUE, ("format",)).fetchone()
                if row is not None and row[0] == CHAIN_FORMAT:
                    # psycopg would prepare statements of its own, and drop every prepared
                    # statement of the session at the first ROLLBACK: ours are kept.
                    conn.prepare_threshold = None
                    _libpq(conn, lambda pgconn: pgconn.prepare(_LOCK_NAME, _LOCK_TEXT))
                    _libpq(conn, lambda pgconn: pgconn.prepare(_HEAD_STATEMENT, _HEAD_TEXT))
        except _import_psycopg().Error as exc:
            _close_quietly(conn)
            raise ChainWriteError(
                f"cannot {doing} the audit chain {self.location}: {self.explain(exc, fired)}"
            ) from exc
        if row is None or row[0] != CHAIN_FORMAT:
            _close_quietly(conn)
            raise ChainWriteError(
                f"cannot {doing} the audit chain {self.location}: unknown format "
                f"{row[0] if row else None!r} (this floorguard writes format {CHAIN_FORMAT}; "
                "run `floorctl chain init --url URL` on a new database)"
            )
        self._conn, self._conn_pid = conn, os.getpid()
        self._prepared = {_LOCK_NAME, _HEAD_STATEMENT}
        return conn, True

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._conn_pid != os.getpid():
            # Inherited over fork: the socket is the parent's. Point it at /dev/null first,
            # so that closing here cannot end the parent's session.
            with contextlib.suppress(Exception):
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, conn.fileno())
                os.close(null)
        _close_quietly(conn)

    def close(self) -> None:
        with self._lock:
            self._drop_connection()

    def exists(self) -> bool:
        with self.read() as view:
            return view is not None

    # -- writing --

    def write(self, attempt: Callable[[WriteView], T], doing: str) -> T:
        pg = _import_psycopg()
        with self._lock:
            for _ in range(2):
                conn, fresh = self._writer(doing)
                with _deadline(conn, self.silence) as fired:
                    try:
                        view = self._open_append(conn)
                    except pg.OperationalError as exc:
                        self._drop_connection()
                        if fresh or fired.is_set():
                            raise ChainWriteError(
                                f"cannot {doing} the audit chain {self.location}: "
                                f"{self.explain(exc, fired)}"
                            ) from exc
                        continue  # a kept connection gone stale (a restart): nothing written
                    except (pg.Error, ValueError) as exc:
                        # Not kept: a session that refused a statement may have lost what
                        # it prepared (DISCARD ALL, a changed table); the next one prepares.
                        self._drop_connection()
                        raise ChainWriteError(
                            f"cannot {doing} the audit chain {self.location}: "
                            f"{self.explain(exc, fired)}"
                        ) from exc
                    return self._finish(conn, view, attempt, doing, fired)
            raise AssertionError("unreachable")  # pragma: no cover

    def _finish(
        self,
        conn: psycopg.Connection[Any],
        view: _View,
        attempt: Callable[[WriteView], T],
        doing: str,
        fired: threading.Event,
    ) -> T:
        pg = _import_psycopg()
        try:
            result = attempt(view)
            view.flush(commit=True)
        except (KeyFileError, ChainWriteError):
            self._rollback(conn)
            raise
        except pg.Error as exc:
            self._drop_connection()  # as in write: the next append opens a fresh session
            raise ChainWriteError(
                f"cannot {doing} the audit chain {self.location}: {self.explain(exc, fired)}"
            ) from exc
        except BaseException:
            self._rollback(conn)
            raise
        return result

    def _open_append(self, conn: psycopg.Connection[Any]) -> _View:
        """BEGIN, the chain's lock (every appender on every host waits here: one linear
        chain) and the head with the tree nodes the next leaf needs, in one round trip."""
        found = _libpq(conn, lambda pgconn: pgconn.exec_(_OPEN_APPEND))
        values = [found.get_value(0, column) for column in range(10)]
        try:
            now = values[0].decode("ascii")
            if values[1] is None:  # no head: an empty chain
                return _View(conn, head=None, prepared=self._prepared, clock=now)
            seq = int(values[1])
            head = (seq, *(value.decode("utf-8") for value in values[2:9]))
            nodes = _parse_nodes(seq, values[9])
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
    def read(self) -> Iterator[_View | None]:
        pg = _import_psycopg()
        conn = self._connect(ChainError, "read")
        try:
            try:
                with _deadline(conn, self.silence) as fired:
                    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    found = conn.execute("SELECT to_regclass(%s)", (_RECORDS,)).fetchone()
            except pg.Error as exc:
                raise ChainError(
                    f"cannot read the audit chain {self.location}: {self.explain(exc, fired)}"
                ) from exc
            if found is None or found[0] is None:
                yield None
                return
            view = _View(conn, stream=True, silence=self.silence)
            try:
                yield view
            except pg.Error as exc:
                raise ChainError(
                    f"cannot read the audit chain {self.location}: {self.explain(exc, view.fired)}"
                ) from exc
        finally:
            _close_quietly(conn)

    def explain(self, exc: BaseException, silent: threading.Event | None = None) -> str:
        """A one-line reason a person can act on, from a psycopg error (``silent``: set
        when the client's own deadline cut the connection)."""
        pg = _import_psycopg()
        errors = pg.errors
        diag = getattr(exc, "diag", None)
        primary = getattr(diag, "message_primary", None) if diag is not None else None
        text = _one_line(primary or str(exc))
        limit = f"{self.timeout:g}s (FLOORGUARD_CHAIN_TIMEOUT)"
        if silent is not None and silent.is_set():
            return (
                f"the database went silent: no answer within {self.silence:g}s "
                f"(twice FLOORGUARD_CHAIN_TIMEOUT); the connection was cut"
            )
        if isinstance(exc, errors.DeadlockDetected):
            return f"{text} (the server ended this transaction to break a lock cycle)"
        if isinstance(exc, errors.LockNotAvailable):
            return f"another appender held the chain for more than {limit}"
        if isinstance(exc, errors.QueryCanceled):
            return f"the database did not answer within {limit}"
        if isinstance(exc, errors.InsufficientPrivilege):
            return (
                f"{text} (the role lacks a privilege: `floorctl chain init` grants "
                f"{APPENDER_ROLE}_DATABASE SELECT and INSERT; records are append-only)"
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
            return f"{text} (the database is unreachable, or the connection was lost)"
        return text


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):
        conn.close()


# --- floorctl chain init ---------------------------------------------------------------------

# UPDATE, DELETE and TRUNCATE are refused to everyone but the tables' owner (an appender
# has no such privilege anyway; this holds even where someone grants it).
_REFUSE_CHANGE = """
CREATE OR REPLACE FUNCTION floorguard.refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF current_user <> pg_catalog.pg_get_userbyid(
       (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID)) THEN
    RAISE EXCEPTION 'floorguard: % on %.% refused: the audit chain is append-only',
      TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
      USING ERRCODE = 'insufficient_privilege',
            HINT = 'only the owner of the chain''s tables may change them';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$
"""
# A record must be the next one, stamped with a real time in the chain's format, no earlier
# than the head and no later than the server's clock (or the head's, when the server's clock
# stepped back below it: honest appenders then reuse the head's time). The database itself
# holds a host to what every honest appender writes, whatever its own code does.
_CHECK_RECORD = """
CREATE OR REPLACE FUNCTION floorguard.check_record() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  stamp text := 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"';
  head_seq bigint;
  head_ts text;
  server_ts text := pg_catalog.to_char(pg_catalog.clock_timestamp() AT TIME ZONE 'UTC', stamp);
  began_ts text := pg_catalog.to_char(pg_catalog.transaction_timestamp() AT TIME ZONE 'UTC',
                                      stamp);
  latest text;
  earliest text;
BEGIN
  SELECT r.seq, r.ts INTO head_seq, head_ts FROM floorguard.records r ORDER BY r.seq DESC LIMIT 1;
  IF NEW.seq IS DISTINCT FROM coalesce(head_seq + 1, 0) THEN
    RAISE EXCEPTION 'floorguard: record % is not the next one (the head is %)',
      NEW.seq, head_seq USING ERRCODE = 'check_violation';
  END IF;
  -- The format with its fields in range, then a time that exists: a 30 February fails the
  -- cast (with PostgreSQL's own message), and a time it would read as another comes back
  -- written otherwise.
  IF NEW.ts !~ ('^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])'
                'T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9][.][0-9]{6}Z$')
     OR pg_catalog.to_char(NEW.ts::timestamptz AT TIME ZONE 'UTC', stamp) <> NEW.ts THEN
    RAISE EXCEPTION 'floorguard: record % is stamped %, which is not a time in the chain''s form',
      NEW.seq, NEW.ts USING ERRCODE = 'check_violation';
  END IF;
  latest := CASE WHEN head_ts COLLATE "C" > server_ts COLLATE "C" THEN head_ts ELSE server_ts END;
  -- No earlier than the head, nor than this transaction's start: an honest appender stamps
  -- the server's clock read after its BEGIN (or the head's time, if later).
  earliest := CASE WHEN head_ts COLLATE "C" > began_ts COLLATE "C" THEN head_ts ELSE began_ts END;
  IF NEW.ts COLLATE "C" > latest COLLATE "C" OR NEW.ts COLLATE "C" < earliest COLLATE "C" THEN
    RAISE EXCEPTION
      'floorguard: record % is stamped %, not between % and the server''s %',
      NEW.seq, NEW.ts, earliest, latest USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$
"""
_DDL = (
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    f"CREATE TABLE IF NOT EXISTS {_META} (key text PRIMARY KEY, value text NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {_RECORDS} ("
    " seq bigint PRIMARY KEY CHECK (seq >= 0), ts text NOT NULL, chain_id text NOT NULL,"
    " event text NOT NULL, receipt_id text NOT NULL, receipt text NOT NULL,"
    " prev text NOT NULL, mac text NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS records_receipt_id ON {_RECORDS} (receipt_id)",
    f"CREATE TABLE IF NOT EXISTS {SCHEMA}.append_lock (id integer PRIMARY KEY CHECK (id = 1))",
    f"INSERT INTO {SCHEMA}.append_lock VALUES (1) ON CONFLICT DO NOTHING",  # noqa: S608
    f"CREATE TABLE IF NOT EXISTS {_TREE} (level integer NOT NULL, idx bigint NOT NULL,"
    " hash bytea NOT NULL, PRIMARY KEY (level, idx))",
    _REFUSE_CHANGE,
    _CHECK_RECORD,
    f"CREATE OR REPLACE TRIGGER records_next_in_line BEFORE INSERT ON {_RECORDS}"
    f" FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.check_record()",
    f"ALTER TABLE {_RECORDS} ENABLE ALWAYS TRIGGER records_next_in_line",
    *(
        statement
        for table in ("meta", "records", "tree", "append_lock")
        for statement in (
            f"CREATE OR REPLACE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE"
            f" ON {SCHEMA}.{table} FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.refuse_change()",
            f"CREATE OR REPLACE TRIGGER {table}_no_truncate BEFORE TRUNCATE"
            f" ON {SCHEMA}.{table} FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.refuse_change()",
            # ALWAYS: they fire under session_replication_role = replica too, which would
            # otherwise let a superuser's session skip them without touching the table.
            f"ALTER TABLE {SCHEMA}.{table} ENABLE ALWAYS TRIGGER {table}_append_only",
            f"ALTER TABLE {SCHEMA}.{table} ENABLE ALWAYS TRIGGER {table}_no_truncate",
        )
    ),
    f"REVOKE ALL ON SCHEMA {SCHEMA} FROM PUBLIC",
    f"REVOKE ALL ON ALL TABLES IN SCHEMA {SCHEMA} FROM PUBLIC",
    f"REVOKE ALL ON FUNCTION {SCHEMA}.refuse_change() FROM PUBLIC",
    f"REVOKE ALL ON FUNCTION {SCHEMA}.check_record() FROM PUBLIC",
)


# What in the chain's schema (the schema itself, its relations, its functions) is owned by a
# role other than the one running init.
_FOREIGN_OWNERS = """
SELECT 'schema ' || n.nspname, pg_catalog.pg_get_userbyid(n.nspowner)
  FROM pg_catalog.pg_namespace n WHERE n.nspname = %s AND n.nspowner <> (
    SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
UNION ALL
SELECT 'table ' || c.relname, pg_catalog.pg_get_userbyid(c.relowner)
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = %s AND c.relowner <> (
    SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
UNION ALL
SELECT 'function ' || p.proname, pg_catalog.pg_get_userbyid(p.proowner)
  FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = %s AND p.proowner <> (
    SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
"""


def init_schema(
    url: str, *, timeout: float, grant_to: Iterable[str] = (), key_check: str | None = None
) -> dict[str, Any]:
    """Create (idempotently) the chain's schema, tables, append-only triggers and the role
    ``floorguard_appender_DATABASE`` (NOLOGIN; SELECT and INSERT only), and grant it to the
    login roles ``grant_to``. Connects as the URL's role, which owns what it creates.
    ``key_check`` (``chain_key.key_check`` of the fleet's key) is stored on first init and
    must match on every later one; appends refuse a key that does not match it.

    Returns what was found or made (``created``, ``chain_id``, ``owner``). Raises
    ChainWriteError (unreachable, refused, or a role in ``grant_to`` does not exist).
    """
    pg = _import_psycopg()
    from psycopg import sql

    store = PostgresStore(url, timeout=timeout)
    conn = store._connect(ChainWriteError, "initialise")
    fired = threading.Event()
    try:
        try:
            # Bounded like an append: a server that goes silent mid-init is cut.
            with _deadline(conn, store.silence) as fired, conn.transaction():
                existed = conn.execute("SELECT to_regclass(%s)", (_RECORDS,)).fetchone()
                created = existed is None or existed[0] is None
                # Whoever owns the schema or anything in it may rewrite records and drop
                # the triggers: refuse one that another role made (even to a superuser).
                # (Catalogs only: no lock on the chain's tables is taken before its own.)
                others = conn.execute(_FOREIGN_OWNERS, (SCHEMA, SCHEMA, SCHEMA)).fetchall()
                if others:
                    listing = ", ".join(f"{what} owned by {who}" for what, who in others)
                    raise ChainWriteError(
                        f"cannot initialise the audit chain {store.location}: another role "
                        f"owns part of schema {SCHEMA} ({listing}); run `floorctl chain init` "
                        "as that role, or drop the schema"
                    )
                # The appenders' own lock first: an init waits for the append in flight and
                # holds the next ones off, so its DDL never locks a table in the opposite
                # order to theirs (a deadlock that refused appends). Before the first init
                # there is no such row: an advisory lock makes two first inits take turns
                # (any connecting role could hold that one, delaying a first init only).
                has_lock_row = conn.execute(
                    "SELECT to_regclass(%s)", (f"{SCHEMA}.append_lock",)
                ).fetchone()
                if has_lock_row is not None and has_lock_row[0] is not None:
                    conn.execute(LOCK_STATEMENT)
                else:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                for statement in _DDL:
                    conn.execute(statement)
                conn.execute(
                    f"INSERT INTO {_META} (key, value) VALUES ('format', %s), ('chain_id', %s)"  # noqa: S608
                    " ON CONFLICT (key) DO NOTHING",
                    (CHAIN_FORMAT, secrets.token_hex(16)),
                )
                if key_check is not None:
                    conn.execute(
                        f"INSERT INTO {_META} (key, value) VALUES ('key_check', %s)"  # noqa: S608
                        " ON CONFLICT (key) DO NOTHING",
                        (key_check,),
                    )
                    stored = conn.execute(_META_VALUE, ("key_check",)).fetchone()
                    if stored is None or stored[0] != key_check:
                        raise ChainWriteError(
                            f"cannot initialise the audit chain {store.location}: the chain "
                            "key here is not the key the chain was initialised with (use the "
                            "fleet's chain key file: FLOORGUARD_CHAIN_KEY_FILE)"
                        )
                fmt = conn.execute(_META_VALUE, ("format",)).fetchone()
                if fmt is None or fmt[0] != CHAIN_FORMAT:
                    raise ChainWriteError(
                        f"cannot initialise the audit chain {store.location}: it holds format "
                        f"{fmt[0] if fmt else None!r} (this floorguard writes {CHAIN_FORMAT})"
                    )
                database = conn.execute("SELECT current_database()").fetchone()
                role_name = appender_role("" if database is None else str(database[0]))
                role = conn.execute(
                    "SELECT rolcanlogin OR rolsuper OR rolcreaterole OR rolcreatedb"
                    " OR rolreplication OR rolbypassrls FROM pg_catalog.pg_roles"
                    " WHERE rolname = %s",
                    (role_name,),
                ).fetchone()
                if role is not None and role[0]:
                    # Made by someone else before: whoever can log in as it appends.
                    raise ChainWriteError(
                        f"cannot initialise the audit chain {store.location}: the role "
                        f"{role_name} exists and can log in or holds a role attribute "
                        "(LOGIN, SUPERUSER, CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS); "
                        "chain init makes it NOLOGIN with none: drop it, or ALTER ROLE it "
                        "NOLOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB NOREPLICATION "
                        "NOBYPASSRLS, then run chain init again"
                    )
                if role is None:
                    conn.execute(
                        sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role_name))
                    )
                appender = sql.Identifier(role_name)
                for statement in (
                    "GRANT USAGE ON SCHEMA {schema} TO {role}",
                    "REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role}",
                    "GRANT SELECT ON {schema}.meta TO {role}",
                    "GRANT SELECT, INSERT ON {schema}.records, {schema}.tree TO {role}",
                    # UPDATE for SELECT ... FOR UPDATE, the chain's lock; its trigger
                    # refuses an UPDATE itself.
                    "GRANT SELECT, UPDATE ON {schema}.append_lock TO {role}",
                ):
                    conn.execute(
                        sql.SQL(statement).format(schema=sql.Identifier(SCHEMA), role=appender)
                    )
                for login in grant_to:
                    found = conn.execute(
                        "SELECT 1 FROM pg_roles WHERE rolname = %s", (login,)
                    ).fetchone()
                    if found is None:
                        raise ChainWriteError(
                            f"cannot grant {role_name} to {login!r}: no such role in "
                            f"{store.location} (create the host's login role first)"
                        )
                    conn.execute(sql.SQL("GRANT {} TO {}").format(appender, sql.Identifier(login)))
                chain_id = conn.execute(_META_VALUE, ("chain_id",)).fetchone()
                owner = conn.execute("SELECT current_user").fetchone()
        except pg.Error as exc:
            raise ChainWriteError(
                f"cannot initialise the audit chain {store.location}: {store.explain(exc, fired)}"
            ) from exc
    finally:
        _close_quietly(conn)
    return {
        "created": created,
        "chain_id": None if chain_id is None else chain_id[0],
        "owner": None if owner is None else owner[0],
        "appender_role": role_name,
        "granted_to": list(grant_to),
    }
