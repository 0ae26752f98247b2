"""Talking to PostgreSQL within a deadline, through psycopg's libpq binding: connection
attempts made against one deadline whatever the URL says, a watchdog that cuts a connection
gone silent, one-round-trip pipelines, and results checked into psycopg's errors.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from floorguard.chainstore import conninfo
from floorguard.errors import ChainWriteError

if TYPE_CHECKING:
    import psycopg

_INSTALL = "install floorguard[postgres] (psycopg 3) to use FLOORGUARD_CHAIN_URL"


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
        self._armed: dict[int, tuple[Any, float, Fired]] = {}
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
                conn = None  # (this long-lived frame must not keep a connection alive)
                self._wake_at = min((d for _, d, _ in self._armed.values()), default=None)
                self._cond.wait(None if self._wake_at is None else self._wake_at - now)

    def guard(self, conn: Any, seconds: float) -> _Guard:
        """Cut ``conn`` if the ``with`` block outlasts ``seconds``; what it yields says
        whether it did."""
        fired = Fired()
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
        return _Guard(self, token, fired)

    def disarm(self, token: int) -> None:
        with self._cond:
            self._armed.pop(token, None)


class Fired:
    """Whether the watchdog cut a connection: set by its thread under its lock, read by the
    guarded block's owner once the block is over. (A plain flag: a threading.Event, with its
    own lock and condition, was a measurable part of every append.)"""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class _Guard:
    """One armed deadline, disarmed when its ``with`` block ends (however it ends)."""

    __slots__ = ("_fired", "_token", "_watchdog")

    def __init__(self, watchdog: _Watchdog, token: int, fired: Fired) -> None:
        self._watchdog, self._token, self._fired = watchdog, token, fired

    def __enter__(self) -> Fired:
        return self._fired

    def __exit__(self, *exc_info: object) -> None:
        self._watchdog.disarm(self._token)


_WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=_WATCHDOG._reset)
_deadline = _WATCHDOG.guard


# How libpq sets out a message the server sent ("SEVERITY:  text"; a hostile server chooses
# the severity too), and psycopg's refusal of a client encoding the server named.
_SERVER_SAYS = re.compile(r"\S+:  |\b(?:FATAL|ERROR|PANIC):|codec not available|encoding")
# SQLSTATE classes a login may fail with, and what they mean.
_LOGIN_CLASSES = {"28": "the server refused the login", "3D": "no such database"}


def without_server_words(text: str, sqlstate: str | None = None) -> str:
    """``text`` (libpq's account of a failed connection) up to the first message the
    server sent, which is replaced by what its SQLSTATE class means, when known."""
    found = _SERVER_SAYS.search(text)
    if found is None:
        return text
    code = sqlstate if sqlstate and re.fullmatch(r"[0-9A-Z]{5}", sqlstate) else None
    if code is None:
        said = "with an error (a refused login, a database that is not there, ...)"
    else:
        said = f"{_LOGIN_CLASSES.get(code[:2], 'an error')}, SQLSTATE {code}"
    return f"{text[: found.start()]}the server answered {said} (its words are not shown)"


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


def _pipeline_results(
    conn: psycopg.Connection[Any],
    send: Callable[[Any], None],
    meanwhile: Callable[[], object] | None = None,
) -> list[Any]:
    """Every result of the queries ``send`` queues, sent in one pipeline (one round trip),
    unchecked: a failed query's error, then PIPELINE_ABORTED for each query after it.
    ``meanwhile`` runs once everything is sent, before the wait for the server.

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
        _flushed(pgconn, waiting, socket_fd)
        if meanwhile is not None:
            meanwhile()
        while True:
            result = _next_result(pgconn, waiting)
            if result is None:
                continue  # the end of one query's results
            if result.status == pq.ExecStatus.PIPELINE_SYNC:
                break
            results.append(result)
    finally:
        with contextlib.suppress(Exception):
            pgconn.exit_pipeline_mode()
    return results


def _flushed(pgconn: Any, waiting: select.poll, socket_fd: int) -> None:
    """Send what the socket did not take yet (psycopg's connections are non-blocking),
    reading meanwhile (a server blocked writing to us would not read either); then
    ``waiting`` polls for input only."""
    waiting.register(socket_fd, select.POLLIN | select.POLLOUT)
    while pgconn.flush():
        waiting.poll()
        pgconn.consume_input()
    waiting.modify(socket_fd, select.POLLIN)


def _next_result(pgconn: Any, waiting: select.poll) -> Any:
    """The next result (None at the end of one query's), waited for by ``waiting``'s poll:
    the watchdog can cut it. Raises OperationalError once the connection is gone."""
    while pgconn.is_busy():
        waiting.poll()
        pgconn.consume_input()
    return pgconn.get_result()


def _statement_results(conn: psycopg.Connection[Any], message: bytes) -> list[Any]:
    """The result of each statement of ``message``, one simple query (one round trip),
    unchecked: the server stops at the first that fails, whose error is the last result.
    The waits are poll()s, as in _pipeline_results, so the watchdog can cut them."""
    pgconn = conn.pgconn
    results: list[Any] = []
    waiting = select.poll()
    pgconn.send_query(message)
    _flushed(pgconn, waiting, pgconn.socket)
    while True:
        result = _next_result(pgconn, waiting)
        if result is None:
            return results
        results.append(result)


def _loaded(
    conn: psycopg.Connection[Any], result: Any, loader: Any = None
) -> list[tuple[Any, ...]]:
    """The rows of a checked ``result``, loaded as psycopg's cursor loads them (the same
    Python type for each column's type) without the cursor's layer; ``loader``: a
    psycopg Transformer of ``conn``'s to reuse."""
    if loader is None:
        loader = _import_psycopg().adapt.Transformer(conn)
    loader.set_pgresult(result)
    rows: list[tuple[Any, ...]] = loader.load_rows(0, result.ntuples, tuple)
    return rows


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
                # Before the login is through, whoever answers may quote back the password
                # libpq sent (from a passfile too): the server's words are not kept.
                message = pgconn.error_message.decode("utf-8", "replace")
                raise pg.OperationalError(_one_line(without_server_words(message)))
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


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):
        conn.close()
