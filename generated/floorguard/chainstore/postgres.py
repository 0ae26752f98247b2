"""The chain in a PostgreSQL database shared by many hosts (``FLOORGUARD_CHAIN_URL``).

psycopg 3 (the ``floorguard[postgres]`` extra) is imported only when this store is used.
The tables live in the schema ``floorguard`` (``meta``, ``records``, ``tree``, and
``append_lock``, whose table lock is the chain's), made by ``init_schema`` (``floorctl chain
init --url URL``) together with the appenders' role. A host's role may SELECT the tables and
write only through the chain's functions (SECURITY DEFINER, run as the tables' owner):
``open_append`` takes the chain's lock (appenders on every host serialise on it; a session
holding it too long is ended by the next waiting append) and returns the head, and
``append_record`` checks that the record is the well-formed next one and stores it with
exactly the tree nodes it adds, which it computes itself, and a receipt in RFC 8785 form
(the form every verifier re-derives). An append is one transaction, two round trips: BEGIN
and open_append; then append_record with the COMMIT, in one pipeline. A process whose last
append found the chain quiet (its own previous record the head) appends ahead, in one round
trip: BEGIN, ``append_next`` (the lock, a check that the tree's right edge is the one the
process knows, then append_record's checks and writes) and the COMMIT, in one pipeline;
when append_next refuses, nothing is written and the append runs the ordinary way. The
records' trigger (``check_record``: the next seq, a ts between the head's and the server's
clock) holds
every other insert, even the owner's own, to that. Records take the server's
clock. Commits are synchronous (a session that the server defaults to
``synchronous_commit=off`` is switched back on). Connect, statement, lock and
idle-in-transaction timeouts are the store's ``timeout`` (``FLOORGUARD_CHAIN_TIMEOUT``,
default 5 s; a connection, every host and address of the URL included, is made within it
whatever the URL says): an unreachable server, a failed login, a timeout or a connection
lost mid-append is a ChainWriteError (the spawn is refused), never a hang; the next append
connects afresh. Messages show the URL only as ``conninfo.describe`` does, and a URL
asking for TLS to a Unix socket is refused.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import ipaddress
import math
import os
import secrets
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from floorguard.chainstore import conninfo
from floorguard.chainstore.interface import (
    CHAIN_FORMAT,
    NODE_ORDER,
    AheadMissed,
    Node,
    Row,
    T,
    WriteView,
)
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


def redact(url: str) -> str:
    """What a message shows of ``url``: ``conninfo.describe`` (host, port, database and user
    in safe shapes; nothing else of it)."""
    return conninfo.describe(url)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


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


def _left(deadline: float) -> float:
    """Seconds until ``deadline`` (a ``time.monotonic()``), at least a moment: a wait that
    begins at the last moment is cut at once rather than not bounded."""
    return max(deadline - time.monotonic(), 0.001)


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ChainWriteError(f"cannot use the audit chain: {_INSTALL}") from exc
    return psycopg


_HEAD = f"SELECT {COLUMNS} FROM {_RECORDS} ORDER BY seq DESC LIMIT 1"  # noqa: S608
# What an appender's writes become: calls of the chain's functions (it may write nothing
# else). A record and its tree nodes go out as one prepared call (_append_statement).
_INSERT_RECORD = "append_record"
_INSERT_NODES = f"SELECT {SCHEMA}.add_tree_nodes(%s::integer[], %s::bigint[], %s::bytea[])"


_NO_HEAD = object()
# An append's first round trip, one message: BEGIN, then open_append (the chain's lock,
# the server's clock, the head and the tree nodes the next leaf needs; a statement
# prepared when the connection opens). READ COMMITTED whatever the session's default: each
# statement takes its snapshot when it starts, so the head is read after the lock is
# granted (the function refuses any other level).
_OPEN_NAME = b"floorguard_open"
_OPEN_TEXT = f"SELECT * FROM {SCHEMA}.open_append($1)".encode()  # noqa: S608
# The chain's lock as its owner takes it (`chain init`); appenders take it only through
# the chain's functions (floorguard.take_lock).
LOCK_STATEMENT = f"LOCK TABLE {SCHEMA}.append_lock IN EXCLUSIVE MODE"


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
    text = f"SELECT {SCHEMA}.{function}($1, $2, $3, $4, $5, $6, $7, $8, {arrays(9, count)}{extra})"
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
        self.clock_read = time.monotonic()  # (a moment after the server read it)
        self.written: tuple[Row, list[Node]] | None = None  # committed by flush(commit=True)
        self._stream = stream
        # A reader's limit on each wait for the server (a writer's whole transaction has
        # one already); ``fired`` tells whether the last one cut the connection.
        self._silence = silence
        self.fired = threading.Event()
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

    def nodes(self) -> Iterator[Node]:
        self.flush()
        query = f"SELECT level, idx, hash FROM {_TREE} {NODE_ORDER}"  # noqa: S608
        cursor = self._conn.cursor(name=f"floorguard_{secrets.token_hex(4)}")
        with cursor:
            with self._waiting():
                cursor.execute(query)
            while True:
                with self._waiting():
                    batch = cursor.fetchmany(512)
                if not batch:
                    break
                for level, index, digest in batch:
                    yield int(level), int(index), bytes(digest)

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

    def known_nodes(self) -> dict[tuple[int, int], bytes]:
        """A copy of the tree nodes read (or prefetched) and written in the transaction."""
        return dict(self._nodes)

    def insert_nodes(self, nodes: Iterable[Node]) -> None:
        batch = list(nodes)
        if batch:
            self._nodes.update(((level, idx), digest) for level, idx, digest in batch)
            self._pending.append((_INSERT_NODES, batch))


def _pipelined(conn: psycopg.Connection[Any], send: Callable[[Any], None], count: int) -> list[Any]:
    """The results of the ``count`` queries ``send`` queues on the connection's libpq handle,
    sent in one pipeline (one round trip); raised as psycopg's error when one failed."""
    results = _pipeline_results(conn, send)
    pgconn = conn.pgconn
    for result in results:
        _checked(pgconn, result)
    if len(results) != count:
        raise _import_psycopg().OperationalError(
            f"{len(results)} results in the pipeline, not {count}"
        )
    return results


def _pipeline_results(conn: psycopg.Connection[Any], send: Callable[[Any], None]) -> list[Any]:
    """Every result of the queries ``send`` queues, sent in one pipeline (one round trip),
    unchecked: a failed query's error, then PIPELINE_ABORTED for each query after it.

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


class _NoAnswer(Exception):
    """A host that did not take the connection within its share of the deadline."""


class _Unprotected(Exception):
    """A connection that would send the password over a Unix socket although the URL asked
    for TLS (found only once libpq read its service file and environment)."""


def _attempts(pg: Any, params: dict[str, Any], deadline: float) -> list[dict[str, Any]]:
    """psycopg's split of ``params`` into one attempt per host and address (it resolves
    host names, load-balances and orders standbys first as libpq would). A name to resolve
    is resolved on a thread, so that a resolver that hangs cannot outlast ``deadline``
    (TimeoutError; the thread ends with the lookup)."""
    hosts = str(params.get("host") or os.environ.get("PGHOST") or "").split(",")
    literal = all(not host or host.startswith(("/", "@")) or _is_address(host) for host in hosts)
    if literal or params.get("hostaddr") or os.environ.get("PGHOSTADDR"):
        found: list[dict[str, Any]] = pg.conninfo.conninfo_attempts(params)
        return found
    outcome: list[Any] = []

    def resolve() -> None:
        try:
            outcome.append(pg.conninfo.conninfo_attempts(params))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=resolve, name="floorguard-chain-resolve", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if not outcome:
        raise TimeoutError
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    resolved: list[dict[str, Any]] = outcome[0]
    return resolved


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _start(pg: Any, attempt: dict[str, Any], seconds: float) -> Any:
    """libpq's handle of a connection to ``attempt`` (one host) made within ``seconds``,
    non-blocking; raises psycopg's OperationalError (libpq's refusal) or _NoAnswer."""
    pq = pg.pq
    until = time.monotonic() + seconds
    pgconn = pq.PGconn.connect_start(pg.conninfo.make_conninfo("", **attempt).encode())
    try:
        # What libpq will use, its service file and PG* variables applied: checked before
        # anything but the startup message (no password) can be sent.
        effective = {
            option.keyword.decode(): option.val.decode("utf-8", "replace")
            for option in pgconn.info
            if option.val is not None
        }
        unprotected = conninfo.tls_over_socket(effective, {})
        if unprotected is not None:
            raise _Unprotected(unprotected)
        waiting = select.poll()
        while True:
            status = pq.PollingStatus.FAILED
            if pgconn.status != pq.ConnStatus.BAD:
                status = pgconn.connect_poll()
            if status == pq.PollingStatus.OK:
                break
            if status == pq.PollingStatus.FAILED:
                message = pgconn.error_message.decode("utf-8", "replace")
                raise pg.OperationalError(_one_line(message))
            # libpq may move to another socket (another address, a retry without TLS).
            socket_fd = pgconn.socket
            reading = status == pq.PollingStatus.READING
            waiting.register(socket_fd, select.POLLIN if reading else select.POLLOUT)
            left = until - time.monotonic()
            ready = waiting.poll(max(0, math.ceil(left * 1000))) if left > 0 else []
            waiting.unregister(socket_fd)
            if not ready:
                raise _NoAnswer
        pgconn.nonblocking = 1
    except BaseException:
        pgconn.finish()
        raise
    return pgconn


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# append_next's refusals that mean the chain is not what this process knew (another writer
# appended, or the tree was changed), or that its estimated stamp did not hold: the append
# is then run again the ordinary way, which says what is wrong if anything is.
_AHEAD_MISSES = (b"40001", b"23514")  # serialization_failure, check_violation
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
        size = record[0] + 1
        wanted = {(0, size - 1)}
        wanted.update((level, (size >> level) - 1) for level in range(size.bit_length())
                      if size >> level & 1)  # fmt: skip
        nodes = {key: known[key] for key in wanted if key in known}
        if len(nodes) != len(wanted) or clock is None:
            return None
        try:
            moment = datetime.datetime.strptime(clock, "%Y-%m-%dT%H:%M:%S.%fZ")
        except ValueError:
            return None
        server_us = (moment.replace(tzinfo=datetime.UTC) - _EPOCH) // _MICROSECOND
        return cls(record, nodes, server_us, received)

    def clock(self) -> str | None:
        """The server's clock now, estimated (not later than it is); None once the reading
        is too old to estimate from (AHEAD_SAMPLE_SECONDS) or time seems to have gone back."""
        elapsed = time.monotonic() - self.received
        if not 0 <= elapsed <= AHEAD_SAMPLE_SECONDS:
            return None
        moment = _EPOCH + datetime.timedelta(microseconds=self.server_us + int(elapsed * 1e6))
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _AheadView:
    """A WriteView running ahead (see interface.WriteView): the head, the clock and the tree
    nodes from an _Ahead; a record and its nodes buffered for append_next; anything else
    raises AheadMissed."""

    ahead = True

    def __init__(self, known: _Ahead, clock: str) -> None:
        self._known = known
        self._clock = clock
        self.nodes_read: dict[tuple[int, int], bytes] = {}
        self.record: Row | None = None
        self.new_nodes: list[Node] | None = None

    def head(self) -> Row | None:
        return self._known.head

    def clock(self) -> str | None:
        return self._clock

    def subtree(self, level: int, index: int) -> bytes | None:
        found = self._known.nodes.get((level, index))
        if found is None:
            raise AheadMissed
        self.nodes_read[(level, index)] = found
        return found

    def insert_record(self, row: Row) -> None:
        if self.record is not None:
            raise AheadMissed
        self.record = row

    def insert_nodes(self, nodes: Iterable[Node]) -> None:
        if self.record is None or self.new_nodes is not None:
            raise AheadMissed
        self.new_nodes = list(nodes)

    def _missed(self, *args: Any) -> Any:
        raise AheadMissed

    record_count = tree_size = _missed
    row = ts_at = rows = first_seq_of = nodes = meta = insert_meta = _missed


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
                f"cannot {doing} the audit chain: {conninfo.URL_ENV} is not a libpq URL "
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
        raise error(f"{failed}: {self.explain(last)}{tried}") from None

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
        conn = self._connect(ChainWriteError, doing, by=deadline)
        try:
            with _deadline(conn, _left(deadline)) as fired:
                row = conn.execute(_META_VALUE, ("format",)).fetchone()
                if row is not None and row[0] == CHAIN_FORMAT:
                    # psycopg would prepare statements of its own, and drop every prepared
                    # statement of the session at the first ROLLBACK: ours are kept.
                    conn.prepare_threshold = None
                    _libpq(conn, lambda pgconn: pgconn.prepare(_OPEN_NAME, _OPEN_TEXT, [_INT8]))
        except _import_psycopg().errors.UndefinedFunction as exc:
            _close_quietly(conn)
            raise ChainWriteError(
                f"cannot {doing} the audit chain {self.location}: its schema predates the "
                "append functions this floorguard writes through; have the chain's owner run "
                "`floorctl chain init --url URL` again"
            ) from exc
        except _import_psycopg().Error as exc:
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
                        if fresh or fired.is_set():
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
        fired: threading.Event,
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
                        # A chain initialised before append_next: never ahead on it.
                        self._ahead_unsupported = True
                        raise AheadMissed
                    self._prepared.add(name)
                params = _binary_params(record, nodes, edge)
                formats = [_BINARY] * len(params)

                def send(pgconn: Any) -> None:
                    pgconn.send_query_params(b"BEGIN ISOLATION LEVEL READ COMMITTED", None)
                    pgconn.send_query_prepared(name, params, formats)
                    pgconn.send_query_params(b"COMMIT", None)

                results = _pipeline_results(conn, send)
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
                if failed.status == pg.pq.ExecStatus.PIPELINE_ABORTED:
                    raise AheadMissed  # (the BEGIN's own failure is reported first)
                error = pg.errors.error_from_result(failed, encoding="utf-8")
                if not isinstance(error, pg.errors.LockNotAvailable | pg.errors.QueryCanceled):
                    self._drop_connection()  # as in _finish: the next append opens afresh
                raise ChainWriteError(
                    f"cannot {doing} the audit chain {self.location}: "
                    f"{self.explain(error, fired, appending=True)}"
                ) from None
            _committed(results[2])
        self._last_written = record
        served = results[1].get_value(0, 0) if results[1].ntuples == 1 else None
        new_nodes = dict(view.nodes_read)
        new_nodes.update(((level, index), digest) for level, index, digest in nodes)
        self._ahead = _Ahead.after(
            record, new_nodes, None if served is None else served.decode("ascii"), received
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
                ) from None
            if found is None or found[0] is None:
                yield None
                return
            view = _View(conn, stream=True, silence=self.silence)
            try:
                yield view
            except pg.Error as exc:
                raise ChainError(
                    f"cannot read the audit chain {self.location}: {self.explain(exc, view.fired)}"
                ) from None
        finally:
            _close_quietly(conn)

    def explain(
        self,
        exc: BaseException,
        silent: threading.Event | None = None,
        *,
        connecting: bool = False,
        appending: bool = False,
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
        text = self._scrub(primary or str(exc))
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
            return f"another appender held the chain for more than {limit}, or several in turn"
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
# A record's ts: a real time in the chain's format, no earlier than the head, than its
# transaction's start or than MAX_STAMP_AGE_SECONDS before it is stored, and no later than
# the server's clock (or the head's, when the server's clock stepped back below it: honest
# appenders then reuse the head's time). An honest append stamps the server's clock read
# under the lock (after its BEGIN), and stores its record within twice
# FLOORGUARD_CHAIN_TIMEOUT of that or is cut; a transaction kept open for hours cannot
# stamp its record with its start.
MAX_STAMP_AGE_SECONDS = 10
# How long before its transaction began a record appended in one round trip (append_next)
# may be stamped: its host stamps it before sending, from the server's clock as the last
# append saw it and the time gone by since (its estimate trails the server's clock by
# about a round trip; it is used only within AHEAD_SAMPLE_SECONDS of that reading).
AHEAD_SLACK_MS = 250
AHEAD_SAMPLE_SECONDS = 30


def _stamp_check(seq: str, ts: str, head_ts: str, *, slack_ms: int = 0) -> str:
    """A PL/pgSQL block refusing the stamp ``ts`` of record ``seq`` after a head stamped
    ``head_ts`` (NULL for the first record): see MAX_STAMP_AGE_SECONDS; ``slack_ms``: see
    AHEAD_SLACK_MS."""
    began = "pg_catalog.transaction_timestamp()"
    if slack_ms:
        began = f"({began} - interval '{int(slack_ms)} milliseconds')"
    return f"""
  DECLARE
    stamp text := 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"';
    server_ts text := pg_catalog.to_char(pg_catalog.clock_timestamp() AT TIME ZONE 'UTC', stamp);
    began_ts text := pg_catalog.to_char(GREATEST({began},
      pg_catalog.clock_timestamp() - interval '{MAX_STAMP_AGE_SECONDS} seconds') AT TIME ZONE 'UTC',
      stamp);
    latest text;
    earliest text;
  BEGIN
    -- The format with its fields in range, then a time that exists: a 30 February fails
    -- the cast (with PostgreSQL's own message), and a time it would read as another comes
    -- back written otherwise.
    IF {ts} !~ ('^[0-9]{{4}}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])'
                'T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9][.][0-9]{{6}}Z$')
       OR pg_catalog.to_char({ts}::timestamptz AT TIME ZONE 'UTC', stamp) <> {ts} THEN
      RAISE EXCEPTION 'floorguard: record % is stamped %, which is not a time in the chain''s form',
        {seq}, {ts} USING ERRCODE = 'check_violation';
    END IF;
    latest := CASE WHEN {head_ts} COLLATE "C" > server_ts COLLATE "C" THEN {head_ts}
                   ELSE server_ts END;
    earliest := CASE WHEN {head_ts} COLLATE "C" > began_ts COLLATE "C" THEN {head_ts}
                     ELSE began_ts END;
    IF {ts} COLLATE "C" > latest COLLATE "C" OR {ts} COLLATE "C" < earliest COLLATE "C" THEN
      RAISE EXCEPTION
        'floorguard: record % is stamped %, not between % and the server''s %',
        {seq}, {ts}, earliest, latest USING ERRCODE = 'check_violation';
    END IF;
  END;
"""


# The records' trigger: a row not inserted by append_record (which checks all this itself,
# then marks the seq it checked; only the tables' owner, as whom it runs, can skip the
# trigger with that mark, and the owner may drop the trigger anyway) must be the next one,
# with a ts as above: even the owner's own inserts by hand are held to what every honest
# appender writes.
CHECKED_SEQ_SETTING = "floorguard.checked_seq"
_CHECK_RECORD = f"""
CREATE OR REPLACE FUNCTION floorguard.check_record() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  head_seq bigint;
  head_ts text;
BEGIN
  SELECT r.seq, r.ts INTO head_seq, head_ts FROM floorguard.records r ORDER BY r.seq DESC LIMIT 1;
  IF NEW.seq IS DISTINCT FROM coalesce(head_seq + 1, 0) THEN
    RAISE EXCEPTION 'floorguard: record % is not the next one (the head is %)',
      NEW.seq, head_seq USING ERRCODE = 'check_violation';
  END IF;
{_stamp_check("NEW.seq", "NEW.ts", "head_ts")}
  RETURN NEW;
END $$
"""  # noqa: S608


def _check_record_trigger(owner: str) -> str:
    """The trigger running check_record on every row but those append_record checked."""
    quoted = owner.replace("'", "''")
    return (
        f"CREATE OR REPLACE TRIGGER records_next_in_line BEFORE INSERT ON {_RECORDS}"
        f" FOR EACH ROW WHEN (pg_catalog.current_setting('{CHECKED_SEQ_SETTING}', true)"
        f" IS DISTINCT FROM NEW.seq::text OR CURRENT_USER <> '{quoted}')"
        f" EXECUTE FUNCTION {SCHEMA}.check_record()"
    )


# RFC 8785 (JSON Canonicalization Scheme) text of a parsed JSON value, to hold a receipt to
# the form every verifier re-derives: a record's link is the digest of its stored text, and
# a receipt in any other form (spaces, another key order, a repeated key, 1.0, 1e2, an
# escape such as \u0041) would make the next record fail its check in every verifier.
# Strings, true, false and null come out of jsonb as RFC 8785 writes them; objects and
# arrays are rebuilt here; numbers: an integer as is (beyond 2^53 no host writes one), any
# other as ECMAScript writes the double it reads as. Keys sort by UTF-16 code units, which
# is code-point order ("C") unless a key holds a character beyond the BMP.
def _canonical_value_sql(value: str) -> str:
    return f"""CASE pg_catalog.jsonb_typeof({value})
      WHEN 'number' THEN CASE WHEN {value}::text ~ '^-?[0-9]{{1,15}}$' THEN {value}::text
                              ELSE floorguard.canonical_number({value}::text) END
      WHEN 'object' THEN floorguard.canonical_json({value}, utf16)
      WHEN 'array' THEN floorguard.canonical_json({value}, utf16)
      ELSE {value}::text END"""


def _canonical_object_sql(value: str, order: str) -> str:
    """PL/pgSQL setting ``rebuilt`` to the canonical text of the jsonb object ``value``,
    its keys sorted by ``order`` (of ``e.key``). Each statement has its own ORDER BY: a
    parameter there costs a plan per call."""
    return f"""    SELECT '{{' || COALESCE(pg_catalog.string_agg(
             pg_catalog.to_json(e.key)::text || ':' || {_canonical_value_sql("e.value")},
             ',' ORDER BY {order}), '') || '}}'
      INTO rebuilt FROM pg_catalog.jsonb_each({value}) e;"""  # noqa: S608


def canonical_receipt_sql(text: str) -> str:
    """SQL for the RFC 8785 form of the JSON text ``text`` (NULL when it has none). jsonb
    cannot read a \\u0000 escape: each stands in as \\uffff while the text is read, and
    comes back once it is written. A text holding U+FFFF itself, or a key holding a NUL
    (U+FFFF would sort it elsewhere), then has no form here."""
    beyond_bmp = f"{text} ~ '[\\U00010000-\\U0010FFFF]'"
    # (A \u0000 after an even run of backslashes: an escape, not an escaped backslash.)
    nul = r"(?<!\\)((?:\\\\)*)\\u0000"
    nul_in_key = nul + r"""(?:[^"\\]|\\.)*":"""
    nul_as_ffff = f"pg_catalog.regexp_replace({text}, '{nul}', '\\1\\\\uffff', 'g')"
    return (
        f"CASE WHEN pg_catalog.strpos({text}, '\\u0000') = 0 OR {text} !~ '{nul}'"
        f" THEN floorguard.canonical_json({text}::jsonb, {beyond_bmp})"
        f" WHEN pg_catalog.strpos({text}, U&'\\FFFF') = 0 AND {text} !~ '{nul_in_key}'"
        f" THEN pg_catalog.replace(floorguard.canonical_json({nul_as_ffff}::jsonb, {beyond_bmp}),"
        f" U&'\\FFFF', '\\u0000') END"
    )


_CANONICAL_JSON = (
    """
CREATE OR REPLACE FUNCTION floorguard.utf16_units(t text) RETURNS integer[]
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
  SELECT pg_catalog.array_agg(v.u ORDER BY s.o, v.p)
    FROM pg_catalog.regexp_split_to_table(t, '') WITH ORDINALITY AS s(c, o),
         LATERAL (VALUES
           (1, CASE WHEN pg_catalog.ascii(s.c) < 65536 THEN pg_catalog.ascii(s.c)
                    ELSE 55296 + ((pg_catalog.ascii(s.c) - 65536) >> 10) END),
           (2, CASE WHEN pg_catalog.ascii(s.c) >= 65536
                    THEN 56320 + ((pg_catalog.ascii(s.c) - 65536) & 1023) END)) AS v(p, u)
   WHERE v.u IS NOT NULL
$$
""",
    """
CREATE OR REPLACE FUNCTION floorguard.canonical_number(raw text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp SET extra_float_digits = 1 AS $$
DECLARE
  parts text[];
  digits text;
  point integer;
  k integer;
  e integer;
  body text;
  cand numeric;
BEGIN
  IF raw ~ '^-?[0-9]{1,16}$' AND pg_catalog.abs(raw::numeric) <= 9007199254740991 THEN
    RETURN raw::numeric::text;  -- an integer, as it reads
  END IF;
  -- The double's shortest digits (extra_float_digits 1), as ECMAScript's Number::toString
  -- lays them out: digits d1..dk and the point after n of them.
  parts := pg_catalog.regexp_match(raw::float8::text,
    '^(-?)([0-9]+)(?:[.]([0-9]+))?(?:e([-+][0-9]+))?$');
  IF parts IS NULL THEN RETURN NULL; END IF;
  digits := parts[2] || COALESCE(parts[3], '');
  point := pg_catalog.length(parts[2]) + COALESCE(parts[4]::integer, 0);
  k := pg_catalog.length(digits);
  digits := pg_catalog.ltrim(digits, '0');
  point := point - (k - pg_catalog.length(digits));
  digits := pg_catalog.rtrim(digits, '0');
  k := pg_catalog.length(digits);
  IF k = 0 THEN RETURN '0'; END IF;
  -- PostgreSQL writes some doubles with 17 digits where fewer read back the same (5e22 as
  -- 4.9999999999999996e+22): the fewest digits that do, rounded from these.
  IF k >= 16 THEN
    FOR p IN 1 .. k - 1 LOOP
      cand := pg_catalog.round(digits::numeric / (10::numeric ^ (k - p)));
      -- (Beyond the largest double's rounding range the cast would fail: no such candidate.)
      IF cand * (10::numeric ^ (point - p)) < 1.7976931348623158e308
         AND (cand * (10::numeric ^ (point - p)))::float8 = pg_catalog.abs(raw::float8) THEN
        point := point + pg_catalog.length(cand::text) - p;
        digits := pg_catalog.rtrim(cand::text, '0');
        k := pg_catalog.length(digits);
        EXIT;
      END IF;
    END LOOP;
  END IF;
  IF k <= point AND point <= 21 THEN
    body := digits || pg_catalog.repeat('0', point - k);
  ELSIF 0 < point AND point <= 21 THEN
    body := pg_catalog.left(digits, point) || '.' || pg_catalog.substr(digits, point + 1);
  ELSIF -6 < point AND point <= 0 THEN
    body := '0.' || pg_catalog.repeat('0', -point) || digits;
  ELSE
    e := point - 1;
    body := CASE WHEN k = 1 THEN digits
                 ELSE pg_catalog.left(digits, 1) || '.' || pg_catalog.substr(digits, 2) END
            || 'e' || CASE WHEN e >= 0 THEN '+' ELSE '-' END || pg_catalog.abs(e)::text;
  END IF;
  -- Digits alone beyond 2^53 read back as an integer no writer may write (RFC 8785's
  -- integers are exact doubles): refused, as floorguard's own writer refuses them.
  IF body !~ '[.e]' AND (k > 16 OR body::numeric > 9007199254740991) THEN
    RETURN NULL;
  END IF;
  RETURN CASE WHEN parts[1] = '-' THEN '-' || body ELSE body END;
END $$
""",
    f"""
CREATE OR REPLACE FUNCTION floorguard.canonical_json(j jsonb, utf16 boolean) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  rebuilt text;
BEGIN
  -- (Two statements, not one ORDER BY with a CASE: a parameter there costs a plan per call.)
  IF pg_catalog.jsonb_typeof(j) = 'object' AND NOT utf16 THEN
{_canonical_object_sql("j", 'e.key COLLATE "C"')}
  ELSIF pg_catalog.jsonb_typeof(j) = 'object' THEN
{_canonical_object_sql("j", "floorguard.utf16_units(e.key)")}
  ELSIF pg_catalog.jsonb_typeof(j) = 'array' THEN
    SELECT '[' || COALESCE(pg_catalog.string_agg({_canonical_value_sql("a.v")}, ','
             ORDER BY a.o), '') || ']'
      INTO rebuilt FROM pg_catalog.jsonb_array_elements(j) WITH ORDINALITY AS a(v, o);
  END IF;  -- (a scalar is never passed: its value's form is rebuilt where it stands)
  RETURN rebuilt;
END $$
""",  # noqa: S608
)


def _json_text_sql(row: str, *, mac: bool) -> str:
    """SQL for the canonical JSON of a record whose fields are ``row`` + column name: its
    body, or with ``mac`` its export line. The same text as chain.body_text and line_text:
    to_json escapes a string exactly as the chain's JSON encoder does, and the receipt is
    stored as its canonical text."""
    names = ["chain_id", "event", *(["mac"] if mac else []), "prev"]
    parts = [f"'{{\"{names[0]}\":' || pg_catalog.to_json({row}{names[0]})::text"]
    parts += [f"',\"{name}\":' || pg_catalog.to_json({row}{name})::text" for name in names[1:]]
    parts += [
        f"',\"receipt\":' || {row}receipt",
        f"',\"receipt_id\":' || pg_catalog.to_json({row}receipt_id)::text",
        f"',\"seq\":' || {row}seq::text",
        f"',\"ts\":' || pg_catalog.to_json({row}ts)::text || '}}'",
    ]
    return " || ".join(parts)


# How long a session may hold the chain's lock before a waiting append ends it (meta
# 'lock_hold_limit_ms', written by init; the owner may change it). An honest append holds
# it for one round trip and a commit.
LOCK_HOLD_LIMIT_MS = 1000

# The chain's lock: an EXCLUSIVE lock on floorguard.append_lock, taken only inside the
# chain's functions (an appender has no privilege on that table: it can neither lock it
# nor take a row lock in it). Re-entrant within a transaction. The wait is bounded by the
# caller's lock_timeout; a holder that has held the lock longer than the limit is ended
# (pg_terminate_backend: the owner needs pg_signal_backend), except the owner's and a
# superuser's sessions. When it was taken, and by which transaction (its 32-bit xid), is
# kept in two unlogged sequences (written outside the transaction, so a waiter sees them at
# once; the time first, so a waiter that reads the holder and then the time never pairs a
# holder with an earlier holder's time): a holder cannot refresh its time by calling again,
# nor can a waiter that waited long be taken for a long holder once it holds the lock. A
# waiter ends only the holder whose time it read: the lock may change hands between its
# reads, and a holder whose hold is not written yet (it has just taken the lock, or its
# statement was cancelled in between) is written by the waiter, counted from then.
_TAKE_LOCK = f"""
CREATE OR REPLACE FUNCTION floorguard.take_lock() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  me bigint := pg_catalog.pg_current_xact_id()::text::bigint % 4294967296;
  caller_timeout text := pg_catalog.current_setting('lock_timeout');
  deadline timestamptz;
  wait interval := interval '{LOCK_HOLD_LIMIT_MS} ms';
  hold_limit interval;
  since timestamptz;
  recorded bigint;
  holder record;
  owner_oid oid;
  stuck boolean := false;
  started timestamptz := pg_catalog.clock_timestamp();
  limit_now interval;
  pass integer;
  lock_table oid := 'floorguard.append_lock'::pg_catalog.regclass;
  own_role oid;
  streak_role oid;  -- the role seen holding the lock at each look since streak_since
  streak_since timestamptz;
  holder_role oid;
BEGIN
  IF caller_timeout::interval > interval '0' THEN
    deadline := pg_catalog.clock_timestamp() + caller_timeout::interval;
  END IF;
  LOOP
    IF deadline IS NOT NULL THEN
      wait := LEAST(wait, deadline - pg_catalog.clock_timestamp());
      IF wait <= interval '0' THEN
        RAISE EXCEPTION 'floorguard: another session holds the chain''s lock'
          USING ERRCODE = 'lock_not_available',
                HINT = CASE WHEN stuck THEN 'the chain''s owner cannot end it: grant it '
                  'pg_signal_backend (GRANT pg_signal_backend TO ' || current_user || ')'
                  ELSE 'it is ended once it has held the lock for longer than meta '
                  'lock_hold_limit_ms' END;
      END IF;
    END IF;
    PERFORM pg_catalog.set_config('lock_timeout',
      GREATEST(1, pg_catalog.ceil(EXTRACT(epoch FROM wait) * 1000))::bigint::text, true);
    BEGIN
      LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE;
      -- (what the append writes: a request queued on them would stall its INSERT)
      LOCK TABLE floorguard.records, floorguard.tree IN ROW EXCLUSIVE MODE;
      EXIT;
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
    SELECT r.oid INTO owner_oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
    SELECT r.oid INTO own_role FROM pg_catalog.pg_roles r WHERE r.rolname = session_user;
    holder_role := NULL;
    -- Backends and their transactions as they are now: within a transaction PostgreSQL
    -- answers from a snapshot taken at the first look, which misses a session that
    -- connected since, and the transaction a session runs now.
    PERFORM pg_catalog.pg_stat_clear_snapshot();
    wait := interval '50 ms';
    -- Two passes: the first ends DDL requests only, before anything below reads a table or
    -- sequence of the chain that such a queued request would make this append wait on.
    FOR pass IN 1 .. 2 LOOP
    IF pass = 2 THEN
    hold_limit := COALESCE((SELECT (m.value || ' ms')::interval FROM floorguard.meta m
                             WHERE m.key = 'lock_hold_limit_ms'),
                           interval '{LOCK_HOLD_LIMIT_MS} ms');
    -- Once this append has waited the hold limit, a holder gets a quarter of it: sessions
    -- taking turns just under the limit would otherwise keep it waiting for good. (Not
    -- less: an honest append holds the lock for a round trip and a commit, which a slow
    -- link or a loaded server stretches.)
    limit_now := CASE WHEN pg_catalog.clock_timestamp() - started >= hold_limit
                      THEN hold_limit / 4 ELSE hold_limit END;
    -- The holder before its time (see above).
    recorded := pg_catalog.pg_sequence_last_value('floorguard.lock_holder');
    since := pg_catalog.to_timestamp(
      pg_catalog.pg_sequence_last_value('floorguard.lock_since') / 1000000.0);
    END IF;
    -- Ended, unless the owner's or a superuser's: the holder of the chain's lock past the
    -- limit, and at once a session asking for (or holding) a lock no append takes on any of
    -- the chain's tables (an appender may not run DDL, yet PostgreSQL queues its request
    -- before checking that, and every append would queue behind it).
    FOR holder IN
      SELECT DISTINCT l.pid, a.usesysid, a.backend_xid::text::bigint AS xid,
             l.mode = 'ExclusiveLock' AND l.relation = lock_table AS holds_lock
        FROM pg_catalog.pg_locks l
        CROSS JOIN LATERAL pg_catalog.pg_stat_get_activity(l.pid) a
        JOIN pg_catalog.pg_class c ON c.oid = l.relation
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE l.locktype = 'relation' AND n.nspname = 'floorguard'
         AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                            WHERE d.datname = pg_catalog.current_database())
         AND l.pid <> pg_catalog.pg_backend_pid()
         AND CASE WHEN l.mode = 'ExclusiveLock' AND l.relation = lock_table
                  THEN l.granted AND pass = 2
                  ELSE l.mode NOT IN ('AccessShareLock', 'RowShareLock', 'RowExclusiveLock') END
    LOOP
      CONTINUE WHEN holder.usesysid = owner_oid OR COALESCE(
        (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid = holder.usesysid), true);
      IF holder.holds_lock THEN
        holder_role := holder.usesysid;
        IF COALESCE(holder.xid, 0) IS DISTINCT FROM recorded THEN
          since := pg_catalog.clock_timestamp();
          PERFORM pg_catalog.setval('floorguard.lock_since',
            (EXTRACT(epoch FROM since) * 1000000)::bigint);
          recorded := COALESCE(holder.xid, 0);
          PERFORM pg_catalog.setval('floorguard.lock_holder', recorded);
        END IF;
        IF since + limit_now > pg_catalog.clock_timestamp() THEN
          wait := since + limit_now - pg_catalog.clock_timestamp() + interval '20 ms';
          CONTINUE;
        END IF;
      END IF;
      IF NOT pg_catalog.pg_has_role('pg_signal_backend', 'USAGE') THEN
        stuck := true;
        wait := COALESCE(limit_now, interval '{LOCK_HOLD_LIMIT_MS} ms');
        CONTINUE;
      END IF;
      RAISE LOG 'floorguard: ending backend % (role %): %', holder.pid,
        pg_catalog.pg_get_userbyid(holder.usesysid), CASE WHEN holder.holds_lock
          THEN 'it held the chain''s lock for over ' || limit_now::text
          ELSE 'it asked for a lock on the chain''s tables that no append takes' END;
      PERFORM pg_catalog.pg_terminate_backend(holder.pid, 1000);
    END LOOP;
    END LOOP;
    -- Sessions of one host taking the lock in turn, each under its limit, keep an append
    -- that leaves the queue to look (as here) behind them for good: a host (a role, not
    -- this append's own, the owner or a superuser) seen holding the lock at every look
    -- for the whole hold limit, while this append has waited at least that, is ended:
    -- all its sessions holding or queued for the lock.
    -- (A look that finds the lock between two holders keeps the streak: it was not free
    -- for this append.)
    IF holder_role IS NOT NULL AND holder_role IS DISTINCT FROM streak_role THEN
      streak_role := holder_role;
      streak_since := pg_catalog.clock_timestamp();
    ELSIF streak_role IS NOT NULL AND streak_role IS DISTINCT FROM own_role
          AND pg_catalog.clock_timestamp() - streak_since >= hold_limit
          AND pg_catalog.clock_timestamp() - started >= hold_limit
          AND pg_catalog.pg_has_role('pg_signal_backend', 'USAGE') THEN
      FOR holder IN
        SELECT DISTINCT l.pid FROM pg_catalog.pg_locks l
          CROSS JOIN LATERAL pg_catalog.pg_stat_get_activity(l.pid) a
         WHERE l.locktype = 'relation' AND l.relation = lock_table
           AND l.pid <> pg_catalog.pg_backend_pid() AND a.usesysid = streak_role
      LOOP
        RAISE LOG 'floorguard: ending backend % (role %): its role held the chain''s lock '
          'in turn for over % while another waited', holder.pid,
          pg_catalog.pg_get_userbyid(streak_role), hold_limit::text;
        -- (Not waited for: this append must be back in the queue before they reconnect.)
        PERFORM pg_catalog.pg_terminate_backend(holder.pid);
      END LOOP;
      streak_role := NULL;
      wait := limit_now;
    END IF;
  END LOOP;
  PERFORM pg_catalog.set_config('lock_timeout', caller_timeout, true);
  PERFORM pg_catalog.setval('floorguard.lock_since',
    (EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000000)::bigint);
  PERFORM pg_catalog.setval('floorguard.lock_holder', me);
END $$
"""  # noqa: S608

_READ_COMMITTED = """
  IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'floorguard: an append runs at READ COMMITTED, not %',
      pg_catalog.current_setting('transaction_isolation')
      USING ERRCODE = 'invalid_transaction_state';
  END IF;
"""

# The chain's lock, as open_append takes it (it declares ``me bigint``): inline when
# uncontended (a call of take_lock costs more than the rest), else waiting in take_lock.
# Always asked of PostgreSQL, never inferred from lock_holder: a savepoint rolled back
# releases the lock but not what the (non-transactional) sequence says. A hold taken at
# once is not written: no one waited for it, and the first waiter to see it writes it,
# counted from then (its transaction has an id from the start, which is how a waiter
# knows it); calling again writes nothing, so a holder cannot renew its hold.
_LOCK_STEP = """
  me := pg_catalog.pg_current_xact_id()::text::bigint % 4294967296;
  -- (Nothing but the LOCK in the block: an expression inside one is set up afresh.)
  BEGIN
    LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE NOWAIT;
    LOCK TABLE floorguard.records, floorguard.tree IN ROW EXCLUSIVE MODE NOWAIT;
  EXCEPTION WHEN lock_not_available THEN
    PERFORM floorguard.take_lock();  -- waits, ends what stalls it, and records the hold
  END;
"""


# An append's first step: the chain's lock, then the server's clock (the new record's
# time), the head record (NULLs for an empty chain) and, as "level:index:hex,...", the
# right edge of the tree of n = head + 1 leaves: the head's leaf (0, head), which says the
# tree is built up to the head, and for each bit L set in n the node (L, (n >> L) - 1). The
# new leaf is hashed with the lowest of them, and all of them fold into the tree's root
# before and after it (what a host remembers: floorguard.chain_view). With a known_size,
# also the left edge of a tree of that size, (L, (known_size >> L) - 1) for each bit L set
# in it: the nodes of the root a witness compares with the one it remembers.
_OPEN_APPEND_FUNCTION = f"""
CREATE OR REPLACE FUNCTION floorguard.open_append(known_size bigint,
  OUT clock text, OUT seq bigint, OUT ts text, OUT chain_id text, OUT event text,
  OUT receipt_id text, OUT receipt text, OUT prev text, OUT mac text, OUT nodes text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  me bigint;
  levels integer[];
  idxs bigint[];
  lvl integer;
  i integer;
  node bytea;
BEGIN
{_READ_COMMITTED}
  IF known_size < 0 THEN
    RAISE EXCEPTION 'floorguard: known_size % is negative', known_size
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
{_LOCK_STEP}
  open_append.clock := pg_catalog.to_char(pg_catalog.clock_timestamp() AT TIME ZONE 'UTC',
                                          'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
  SELECT r.seq, r.ts, r.chain_id, r.event, r.receipt_id, r.receipt, r.prev, r.mac,
         (SELECT t.hash FROM floorguard.tree t WHERE t.level = 0 AND t.idx = r.seq)
    INTO open_append.seq, open_append.ts, open_append.chain_id, open_append.event,
         open_append.receipt_id, open_append.receipt, open_append.prev, open_append.mac, node
    FROM floorguard.records r ORDER BY r.seq DESC LIMIT 1;
  IF node IS NOT NULL THEN
    open_append.nodes := '0:' || open_append.seq::text || ':' || pg_catalog.encode(node, 'hex');
  END IF;
  -- One index probe per node: a join here would be planned afresh for each call.
  IF open_append.seq IS NOT NULL THEN
    FOR lvl IN 1 .. 62 LOOP
      EXIT WHEN (open_append.seq + 1) >> lvl = 0;
      IF (open_append.seq + 1) & (1::bigint << lvl) <> 0 THEN
        levels := levels || lvl;
        idxs := idxs || ((open_append.seq + 1) >> lvl) - 1;
      END IF;
    END LOOP;
  END IF;
  -- (Of a known_size equal to the head's tree, every node is listed above already.)
  FOR lvl IN 0 .. 62 LOOP
    EXIT WHEN known_size IS NULL OR known_size >> lvl = 0
           OR known_size = open_append.seq + 1;
    IF known_size & (1::bigint << lvl) <> 0 THEN
      levels := levels || lvl;
      idxs := idxs || (known_size >> lvl) - 1;
    END IF;
  END LOOP;
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(levels), 0) LOOP
    SELECT t.hash INTO node FROM floorguard.tree t WHERE t.level = levels[i] AND t.idx = idxs[i];
    IF FOUND THEN
      open_append.nodes := pg_catalog.concat_ws(',', open_append.nodes,
        levels[i]::text || ':' || idxs[i]::text || ':' || pg_catalog.encode(node, 'hex'));
    END IF;
  END LOOP;
END $$
"""  # noqa: S608

_LEAF = "pg_catalog.sha256(pg_catalog.decode('00', 'hex') || {utf8})".format(
    utf8="pg_catalog.convert_to({line}, 'UTF8')"
)
_NODE = "pg_catalog.sha256(pg_catalog.decode('01', 'hex') || {left} || {right})"
_EVENT_NAMES = ", ".join(
    f"'{name}'"
    for name in sorted(
        (
            "adapter.spawn_preflight_receipt",
            "adapter.version_posture",
            "adapter.floor_update_receipt",
            "adapter.canary_receipt",
        )
    )
)
MAX_RECEIPT_BYTES = 1 << 20  # chain.MAX_RECEIPT_BYTES: the receipt's UTF-8 bytes

# The one way an appender writes: a well-formed next record, and exactly the tree nodes it
# adds (its leaf and the subtrees it completes), each recomputed here from the record and
# the stored siblings; its ts as the records' trigger would check it (which then skips the
# row). On a chain whose tree is not built up to the head yet (written before the tree
# existed), the record comes without nodes; the tree is then built through add_tree_nodes.
_APPEND_RECORD_ARGS = (
    "bigint, text, text, text, text, text, text, text, integer[], bigint[], bytea[]"
)


def _append_function(name: str, *, ahead: bool) -> str:
    """The CREATE statement of ``append_record`` or, with ``ahead``, of ``append_next``.

    append_next is an append in one round trip, for a host that already knows the head (it
    wrote it): it takes the chain's lock itself (as open_append does), refuses with
    serialization_failure unless the right edge of the stored tree is the one the host
    sent (the tree it remembers), stores the record as append_record does, and returns the
    server's clock, which the host's next stamp is estimated from. Its record may be stamped
    up to AHEAD_SLACK_MS before its transaction began: the host stamps it before sending.
    """
    slack_ms = AHEAD_SLACK_MS if ahead else 0
    extra_args = (
        ",\n  edge_levels integer[], edge_idxs bigint[], edge_hashes bytea[]" if ahead else ""
    )
    returns = "text" if ahead else "void"
    lock = (_LOCK_STEP + _EDGE_CHECK) if ahead else _LOCK_IN_LINE
    ending = (
        "  RETURN pg_catalog.to_char(pg_catalog.clock_timestamp() AT TIME ZONE 'UTC',\n"
        '                            \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\');\n'
        if ahead
        else ""
    )
    return f"""
CREATE OR REPLACE FUNCTION floorguard.{name}(seq bigint, ts text, chain_id text,
  event text, receipt_id text, receipt text, prev text, mac text,
  levels integer[], idxs bigint[], hashes bytea[]{extra_args}) RETURNS {returns}
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  me bigint;
  head floorguard.records%ROWTYPE;
  rebuilt text;
  utf16 boolean := false;  -- (what the nested values' rebuilding reads: no key beyond the BMP)
  has_head boolean;
  head_leaf bytea;
  chain text;
  expected text;
  node bytea;
  left_hash bytea;
  pos bigint;
  lvl integer := 0;
  want_levels integer[];
  want_idxs bigint[];
  want_hashes bytea[];
BEGIN
{_READ_COMMITTED}
{lock}  -- The head and its leaf (the tree is built up to the head) in one query. A record names
  -- the chain its head names (the first one, meta's: chain init's).
  SELECT r.seq, r.ts, r.chain_id, r.event, r.receipt_id, r.receipt, r.prev,
         (SELECT t.hash FROM floorguard.tree t WHERE t.level = 0 AND t.idx = r.seq)
    INTO head.seq, head.ts, head.chain_id, head.event, head.receipt_id, head.receipt,
         head.prev, head_leaf
    FROM floorguard.records r ORDER BY r.seq DESC LIMIT 1;
  has_head := FOUND;
  chain := head.chain_id;
  IF NOT has_head THEN
    chain := (SELECT m.value FROM floorguard.meta m WHERE m.key = 'chain_id');
  END IF;
  IF {name}.seq IS DISTINCT FROM (CASE WHEN has_head THEN head.seq + 1 ELSE 0 END) THEN
    RAISE EXCEPTION 'floorguard: record % is not the next one (the head is %)',
      {name}.seq, head.seq USING ERRCODE = 'check_violation';
  END IF;
  expected := 'sha256:' || CASE WHEN has_head THEN pg_catalog.encode(pg_catalog.sha256(
    pg_catalog.convert_to({_json_text_sql("head.", mac=False)}, 'UTF8')), 'hex')
    ELSE pg_catalog.repeat('0', 64) END;
  IF {name}.prev IS DISTINCT FROM expected THEN
    RAISE EXCEPTION 'floorguard: record %''s prev % is not the digest of the head (%)',
      {name}.seq, {name}.prev, expected USING ERRCODE = 'check_violation';
  END IF;
  IF {name}.chain_id IS DISTINCT FROM chain THEN
    RAISE EXCEPTION 'floorguard: record % names chain %, not this chain (%)',
      {name}.seq, {name}.chain_id, chain USING ERRCODE = 'check_violation';
  END IF;
  IF {name}.event IS NULL OR {name}.event NOT IN ({_EVENT_NAMES}) THEN
    RAISE EXCEPTION 'floorguard: record %''s event % is not one of the chain''s events',
      {name}.seq, {name}.event USING ERRCODE = 'check_violation';
  END IF;
  -- A JSON object in RFC 8785 form: what every verifier re-derives from the record. (A
  -- receipt that is not JSON at all fails the cast, with PostgreSQL's own message: a block
  -- catching it would cost a subtransaction on every append.)
  -- (The common receipt, an object with no NUL and no key beyond the BMP, rebuilt here:
  -- a call of canonical_json costs more than the rebuilding.)
  IF pg_catalog.octet_length({name}.receipt) <= {MAX_RECEIPT_BYTES}
     AND pg_catalog.left({name}.receipt, 1) = '{{' THEN
    IF pg_catalog.strpos({name}.receipt, '\\u0000') = 0
       AND {name}.receipt !~ '[\\U00010000-\\U0010FFFF]' THEN
{_canonical_object_sql(name + ".receipt::jsonb", 'e.key COLLATE "C"')}
    ELSE
      rebuilt := {canonical_receipt_sql(name + ".receipt")};
    END IF;
  END IF;
  IF rebuilt IS DISTINCT FROM {name}.receipt THEN
    RAISE EXCEPTION 'floorguard: record %''s receipt is not a JSON object of at most % bytes '
      'in canonical form (RFC 8785: no spaces, keys sorted and unique, each string, '
      'number and literal written one way)', {name}.seq, {MAX_RECEIPT_BYTES}
      USING ERRCODE = 'check_violation';
  END IF;
  IF {name}.receipt_id IS DISTINCT FROM 'sha256:' || pg_catalog.encode(
       pg_catalog.sha256(pg_catalog.convert_to({name}.receipt, 'UTF8')), 'hex') THEN
    RAISE EXCEPTION 'floorguard: record %''s receipt_id is not the digest of its receipt',
      {name}.seq USING ERRCODE = 'check_violation';
  END IF;
  -- ^([0-9a-f]{{64}}|ed25519:[0-9a-f]{{16}}:[0-9a-f]{{128}})$, in a tenth of a regex's time.
  IF (CASE pg_catalog.length({name}.mac)
      WHEN 64 THEN pg_catalog.ltrim({name}.mac, '0123456789abcdef') = ''
      WHEN 153 THEN pg_catalog.left({name}.mac, 8) = 'ed25519:'
        AND pg_catalog.substr({name}.mac, 25, 1) = ':'
        AND pg_catalog.ltrim(pg_catalog.substr({name}.mac, 9, 16), '0123456789abcdef') = ''
        AND pg_catalog.ltrim(pg_catalog.substr({name}.mac, 26), '0123456789abcdef') = ''
      END) IS NOT TRUE THEN
    RAISE EXCEPTION 'floorguard: record %''s mac is neither an HMAC (64 lowercase hex) nor '
      'a host signature (ed25519:<key id>:<signature>)', {name}.seq
      USING ERRCODE = 'check_violation';
  END IF;
{_stamp_check(name + ".seq", name + ".ts", "head.ts", slack_ms=slack_ms)}
  IF {name}.seq = 0 OR head_leaf IS NOT NULL THEN
    node := {_LEAF.format(line=_json_text_sql(name + ".", mac=True))};
    pos := {name}.seq;
    want_levels := ARRAY[0];
    want_idxs := ARRAY[pos];
    want_hashes := ARRAY[node];
    WHILE pos & 1 = 1 LOOP
      left_hash := head_leaf;  -- (0, seq - 1)
      IF lvl > 0 THEN
        left_hash := NULL;
        SELECT t.hash INTO left_hash FROM floorguard.tree t
         WHERE t.level = lvl AND t.idx = pos - 1;
      END IF;
      IF left_hash IS NULL THEN
        RAISE EXCEPTION 'floorguard: the Merkle tree lacks subtree (%, %)', lvl, pos - 1
          USING ERRCODE = 'data_corrupted';
      END IF;
      node := {_NODE.format(left="left_hash", right="node")};
      lvl := lvl + 1;
      pos := pos >> 1;
      want_levels := want_levels || lvl;
      want_idxs := want_idxs || pos;
      want_hashes := want_hashes || node;
    END LOOP;
  END IF;
  IF COALESCE(want_levels, '{{}}') IS DISTINCT FROM levels
     OR COALESCE(want_idxs, '{{}}') IS DISTINCT FROM idxs
     OR COALESCE(want_hashes, '{{}}') IS DISTINCT FROM hashes THEN
    RAISE EXCEPTION 'floorguard: record %''s tree nodes are not its leaf and the subtrees it '
      'completes', {name}.seq USING ERRCODE = 'check_violation';
  END IF;
  -- Checked: the records' trigger need not read the head again for this row.
  PERFORM pg_catalog.set_config('{CHECKED_SEQ_SETTING}', {name}.seq::text, true);
  -- One statement (each costs an executor's start): the record, then its nodes (none on a
  -- chain whose tree is not built yet).
  WITH r AS (
    INSERT INTO floorguard.records (seq, ts, chain_id, event, receipt_id, receipt, prev, mac)
    VALUES ({name}.seq, {name}.ts, {name}.chain_id, {name}.event,
            {name}.receipt_id, {name}.receipt, {name}.prev,
            {name}.mac))
  INSERT INTO floorguard.tree (level, idx, hash)
  SELECT want_levels[g.i], want_idxs[g.i], want_hashes[g.i]
    FROM pg_catalog.generate_series(1, pg_catalog.cardinality(want_levels)) AS g(i);
{ending}END $$
"""  # noqa: S608


_LOCK_IN_LINE = """
  -- The chain's lock, asked of PostgreSQL itself: granted at once to the transaction that
  -- holds it (open_append took it, as an honest append does); anyone else waits in line,
  -- whatever lock_holder says (a savepoint rolled back releases the lock, not the sequence).
  LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE;
"""
# append_next's check of the host's tree: every node of the right edge it sent is stored.
_EDGE_CHECK = """
  IF pg_catalog.cardinality(edge_levels) IS DISTINCT FROM pg_catalog.cardinality(edge_idxs)
     OR pg_catalog.cardinality(edge_levels) IS DISTINCT FROM pg_catalog.cardinality(edge_hashes)
     OR (SELECT pg_catalog.count(*) FROM floorguard.tree t,
           ROWS FROM (pg_catalog.unnest(edge_levels), pg_catalog.unnest(edge_idxs),
                      pg_catalog.unnest(edge_hashes)) AS e(l, i, h)
          WHERE t.level = e.l AND t.idx = e.i AND t.hash = e.h)
        <> COALESCE(pg_catalog.cardinality(edge_levels), 0) THEN
    RAISE EXCEPTION 'floorguard: the chain is not the one this host last wrote'
      USING ERRCODE = 'serialization_failure';
  END IF;
"""
_APPEND_RECORD = _append_function("append_record", ahead=False)
_APPEND_NEXT = _append_function("append_next", ahead=True)
_APPEND_NEXT_ARGS = _APPEND_RECORD_ARGS + ", integer[], bigint[], bytea[]"

# Tree nodes of stored records (a chain written before the tree existed gets its tree this
# way): each is recomputed from its record (a leaf) or from its two stored children.
_ADD_TREE_NODES = f"""
CREATE OR REPLACE FUNCTION floorguard.add_tree_nodes(levels integer[], idxs bigint[],
  hashes bytea[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  node bytea;
  i integer;
BEGIN
{_READ_COMMITTED}
  PERFORM floorguard.take_lock();
  IF pg_catalog.cardinality(levels) IS DISTINCT FROM pg_catalog.cardinality(idxs)
     OR pg_catalog.cardinality(levels) IS DISTINCT FROM pg_catalog.cardinality(hashes) THEN
    RAISE EXCEPTION 'floorguard: levels, indexes and hashes differ in number'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR i IN 1 .. pg_catalog.cardinality(levels) LOOP
    node := NULL;
    IF levels[i] = 0 THEN
      SELECT {_LEAF.format(line=_json_text_sql("r.", mac=True))} INTO node
        FROM floorguard.records r WHERE r.seq = idxs[i];
    ELSIF levels[i] BETWEEN 1 AND 62 THEN
      SELECT {_NODE.format(left="a.hash", right="b.hash")} INTO node
        FROM floorguard.tree a JOIN floorguard.tree b
          ON b.level = a.level AND b.idx = a.idx + 1
       WHERE a.level = levels[i] - 1 AND a.idx = idxs[i] * 2;
    END IF;
    IF node IS NULL OR node IS DISTINCT FROM hashes[i] THEN
      RAISE EXCEPTION 'floorguard: tree node (%, %) is not the hash of its stored %',
        levels[i], idxs[i], CASE WHEN levels[i] = 0 THEN 'record' ELSE 'children' END
        USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO floorguard.tree (level, idx, hash) VALUES (levels[i], idxs[i], node);
  END LOOP;
END $$
"""  # noqa: S608
# The functions an appender may call (EXECUTE is granted on these only).
APPEND_FUNCTIONS = (
    f"{SCHEMA}.open_append(bigint)",
    f"{SCHEMA}.append_record({_APPEND_RECORD_ARGS})",
    f"{SCHEMA}.append_next({_APPEND_NEXT_ARGS})",
    f"{SCHEMA}.add_tree_nodes(integer[], bigint[], bytea[])",
)
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
    # Unlogged: who took the chain's lock and when matters only while the server runs.
    f"CREATE UNLOGGED SEQUENCE IF NOT EXISTS {SCHEMA}.lock_holder MINVALUE 0",
    f"CREATE UNLOGGED SEQUENCE IF NOT EXISTS {SCHEMA}.lock_since MINVALUE 0",
    _REFUSE_CHANGE,
    _CHECK_RECORD,
    _TAKE_LOCK,
    *_CANONICAL_JSON,
    _OPEN_APPEND_FUNCTION,
    _APPEND_RECORD,
    _APPEND_NEXT,
    _ADD_TREE_NODES,
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
    f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {SCHEMA} FROM PUBLIC",
    # Every role may execute a new function: not these.
    f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {SCHEMA} FROM PUBLIC",
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
    """Create (idempotently) the chain's schema, tables, append-only triggers, append
    functions and the role ``floorguard_appender_DATABASE`` (NOLOGIN; SELECT on the tables
    and EXECUTE on the append functions only: what earlier inits granted beyond that is
    revoked), and grant it to the login roles ``grant_to``. Connects as the URL's role,
    which owns what it creates (and as whom the append functions run).
    ``key_check`` (``chain_key.key_check`` of the fleet's key) is stored on first init and
    must match on every later one; appends refuse a key that does not match it.

    Returns what was found or made (``created``, ``chain_id``, ``owner``, and
    ``ends_lock_holders``: whether the owner may end a session that holds the chain's lock
    too long, i.e. is a superuser or has pg_signal_backend; ``prepared_transactions``: the
    server's max_prepared_transactions, which should be 0). Raises
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
                owner_name = conn.execute("SELECT current_user").fetchone()
                conn.execute(_check_record_trigger("" if owner_name is None else owner_name[0]))
                conn.execute(f"ALTER TABLE {_RECORDS} ENABLE ALWAYS TRIGGER records_next_in_line")
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
                    # What older inits granted (INSERT, UPDATE on the lock's table) goes:
                    # an appender reads, and writes only through the append functions.
                    "REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role}",
                    "REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role}",
                    "REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {schema} FROM {role}",
                    "GRANT SELECT ON {schema}.meta, {schema}.records, {schema}.tree TO {role}",
                    *(f"GRANT EXECUTE ON FUNCTION {name} TO {{role}}" for name in APPEND_FUNCTIONS),
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
                conn.execute(
                    f"INSERT INTO {_META} (key, value) VALUES ('lock_hold_limit_ms', %s)"  # noqa: S608
                    " ON CONFLICT (key) DO NOTHING",
                    (str(LOCK_HOLD_LIMIT_MS),),
                )
                chain_id = conn.execute(_META_VALUE, ("chain_id",)).fetchone()
                owner = conn.execute("SELECT current_user").fetchone()
                # Ending a session that holds the chain's lock too long takes this (or
                # superuser); without it such a session stops every append until it ends.
                can_end = conn.execute(
                    "SELECT pg_catalog.pg_has_role('pg_signal_backend', 'USAGE'),"
                    " pg_catalog.current_setting('max_prepared_transactions')::integer"
                ).fetchone()
        except pg.Error as exc:
            raise ChainWriteError(
                f"cannot initialise the audit chain {store.location}: {store.explain(exc, fired)}"
            ) from None
    finally:
        _close_quietly(conn)
    return {
        "created": created,
        "chain_id": None if chain_id is None else chain_id[0],
        "owner": None if owner is None else owner[0],
        "appender_role": role_name,
        "granted_to": list(grant_to),
        "ends_lock_holders": bool(can_end and can_end[0]),
        # A prepared transaction keeps its locks with no session to end: with these
        # enabled, an appender could hold the chain's lock until a superuser rolls it back.
        "prepared_transactions": int(can_end[1]) if can_end else 0,
    }
