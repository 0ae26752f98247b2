"""The audit chain: every receipt floorguard issues, in one HMAC-linked log in SQLite.

Record format
-------------
A record has eight fields: ``seq`` (integer, from 0, contiguous), ``ts`` (RFC 3339 UTC with
``Z``, the time of the append), ``chain_id`` (32 lowercase hex characters, random, fixed at
genesis), ``event`` (one of ``EVENTS``), ``receipt`` (the receipt object), ``receipt_id``
(the receipt's content address), ``prev`` and ``mac``.

The record body is the JSON object of the seven fields seq, ts, chain_id, event, receipt_id,
receipt, prev; its canonical bytes are RFC 8785 (JCS). The record digest is ``sha256:`` +
hex(sha256(canonical body)); the MAC is hex(HMAC-SHA256(key, canonical body)). The next
record's prev is this digest; the genesis record's prev is ``sha256:`` and 64 zeros.

An exported slice is JSON Lines: one record a line, written as the RFC 8785 canonical JSON
of all eight fields (verifiers accept any JSON spelling of a line, but refuse duplicate keys).

Timestamps never go backwards along the chain: an append stamped earlier than the head
(the wall clock stepped back) takes the head's timestamp, so that time windows map onto
contiguous runs of records.

Storage: ``chain.sqlite3`` in WAL mode with ``synchronous=FULL``; every append is one
``BEGIN IMMEDIATE`` transaction that reads the head and inserts the next record, so appends
from many processes serialise into one linear chain, and ``append`` returns only once the
record is durable. ``sqlite3`` is imported on first use.

The Merkle tree: the records are also the leaves, in seq order, of an RFC 6962 tree whose
leaf input is a record's export line (``floorguard.merkle``). The table ``tree`` keeps every
complete subtree hash, keyed by (level, index); each append adds its leaf and the subtrees
it completes in the same transaction as the record, so any inclusion or consistency proof
needs O(log n) lookups. A chain written before the tree existed gets its tree built from its
records, unchanged, on first use (the next append, or ``ensure_tree``).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from floorguard import merkle
from floorguard._canonical import ZERO_DIGEST, canonical_bytes, plain_json_text
from floorguard._time import format_ts, now_ts, parse_ts
from floorguard.chain_key import load_key, load_or_create_key
from floorguard.errors import (
    CanonicalizationError,
    ChainError,
    ChainWriteError,
    FloorguardError,
    KeyFileError,
)
from floorguard.state import state_key, state_paths

if TYPE_CHECKING:
    import sqlite3

EVENTS: frozenset[str] = frozenset(
    {
        "adapter.spawn_preflight_receipt",
        "adapter.version_posture",
        "adapter.floor_update_receipt",
        "adapter.canary_receipt",
    }
)
RECORD_FIELDS: tuple[str, ...] = (
    "seq",
    "ts",
    "chain_id",
    "event",
    "receipt_id",
    "receipt",
    "prev",
    "mac",
)
BODY_FIELDS: tuple[str, ...] = RECORD_FIELDS[:-1]
CHAIN_FORMAT = "1"
MAX_RECEIPT_BYTES = 1 << 20
BUSY_TIMEOUT_SECONDS = 30.0
GENESIS_PREV = ZERO_DIGEST

_COLUMNS = "seq, ts, chain_id, event, receipt_id, receipt, prev, mac"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS records ("
    " seq INTEGER PRIMARY KEY, ts TEXT NOT NULL, chain_id TEXT NOT NULL, event TEXT NOT NULL,"
    " receipt_id TEXT NOT NULL, receipt TEXT NOT NULL, prev TEXT NOT NULL, mac TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tree (level INTEGER NOT NULL, idx INTEGER NOT NULL,"
    " hash BLOB NOT NULL, PRIMARY KEY (level, idx)) WITHOUT ROWID",
)
_T = TypeVar("_T")
_HEX = frozenset("0123456789abcdef")


# --- canonical bytes, fast -------------------------------------------------------------------
# (floorguard._canonical says when json's output is RFC 8785; this is its text-level check
# for lines read back, where only the characters are known.)


def _keys_sort_alike(text: str) -> bool:
    """No character in ``text`` can make code-point order differ from UTF-16 order."""
    return text.isascii() or max(text) < "\ue000"


def canonical_json(value: Any) -> str:
    """The RFC 8785 canonical JSON of ``value`` as text.

    Uses the C ``json`` encoder when the result provably equals RFC 8785 (plain JSON types
    only, no float, no integer beyond 15 digits, no character whose UTF-16 order differs),
    else the ``rfc8785`` reference. Raises CanonicalizationError.
    """
    return _canonical_and_plain(value)[0]


def _canonical_and_plain(value: Any) -> tuple[str, Any]:
    """The canonical JSON of ``value``, and ``value`` as plain JSON values (itself when it
    already is; else the canonical JSON read back)."""
    text = plain_json_text(value)
    if text is not None:
        return text, value
    text = canonical_bytes(value).decode("utf-8")
    plain = json.loads(text)
    # A float such as 2.0**53 is written as an integer that RFC 8785 then refuses to read
    # back: refuse it here, rather than write a record no verifier can re-canonicalise.
    try:
        again = canonical_bytes(plain).decode("utf-8")
    except CanonicalizationError as exc:
        raise CanonicalizationError(
            f"value does not survive a JSON round trip unchanged ({exc})"
        ) from exc
    if again != text:
        raise CanonicalizationError("value does not survive a JSON round trip unchanged")
    return text, plain


# One encoder, built once: json.dumps would build a new one per call.
COMPACT_SORTED = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
# The C string encoder behind json.dumps(..., ensure_ascii=False).
JSON_STRING: Callable[[str], str] = encode_basestring
_jstr = JSON_STRING


def body_text(
    *, seq: int, ts: str, chain_id: str, event: str, receipt_id: str, receipt_json: str, prev: str
) -> str:
    """The canonical body of a record, given its receipt already in canonical JSON.

    The seven keys are fixed ASCII names, so their sorted order is written out here; string
    values must be JSON text without lone surrogates (``encode`` refuses those).
    """
    return (
        f'{{"chain_id":{_jstr(chain_id)},"event":{_jstr(event)},"prev":{_jstr(prev)},'
        f'"receipt":{receipt_json},"receipt_id":{_jstr(receipt_id)},"seq":{seq},'
        f'"ts":{_jstr(ts)}}}'
    )


def line_text(
    *,
    seq: int,
    ts: str,
    chain_id: str,
    event: str,
    receipt_id: str,
    receipt_json: str,
    prev: str,
    mac: str,
) -> str:
    """The canonical JSON of a whole record (the export line, without its newline)."""
    return (
        f'{{"chain_id":{_jstr(chain_id)},"event":{_jstr(event)},"mac":{_jstr(mac)},'
        f'"prev":{_jstr(prev)},"receipt":{receipt_json},"receipt_id":{_jstr(receipt_id)},'
        f'"seq":{seq},"ts":{_jstr(ts)}}}'
    )


def record_digest(body: bytes) -> str:
    """``sha256:`` + hex(sha256(canonical body))."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


def record_mac(key: bytes, body: bytes) -> str:
    """hex(HMAC-SHA256(key, canonical body))."""
    return hmac.digest(key, body, "sha256").hex()


def is_chain_id(text: object) -> bool:
    """True for 32 lowercase hex characters."""
    return isinstance(text, str) and len(text) == 32 and set(text) <= _HEX


def is_mac(text: object) -> bool:
    """True for 64 lowercase hex characters."""
    return isinstance(text, str) and len(text) == 64 and set(text) <= _HEX


def receipt_problem(event: str, receipt: object) -> str | None:
    """Why ``receipt`` cannot be recorded under ``event``, or None when it can."""
    if event not in EVENTS:
        return f"unknown event {event!r} (allowed: {', '.join(sorted(EVENTS))})"
    if not isinstance(receipt, dict):
        return "receipt is not a JSON object"
    kind = receipt.get("kind")
    if kind != event:
        return f"receipt kind {kind!r} does not match event {event!r}"
    version = receipt.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return "receipt has no schema_version (a positive integer)"
    stamp = receipt.get("ts")
    if not isinstance(stamp, str):
        return "receipt has no ts (an RFC 3339 timestamp)"
    try:
        parse_any_ts(stamp)
    except FloorguardError:
        return f"receipt ts {stamp!r} is not an RFC 3339 timestamp"
    return None


# The form this project writes: fixed width, so that such stamps also sort as text.
_UTC_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z")


def parse_any_ts(text: str) -> datetime:
    """An RFC 3339 timestamp (Z or offset) as an aware UTC datetime; FloorguardError if not.

    The common ``...Z`` form takes a fast path; anything else goes through ``parse_ts``.
    """
    if _UTC_Z.fullmatch(text):
        try:
            return datetime.fromisoformat(text[:-1]).replace(tzinfo=UTC)
        except ValueError:
            pass  # e.g. month 13: parse_ts words the error
    return parse_ts(text)


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainRecord:
    """One record of the chain, as stored and exported."""

    seq: int
    ts: str
    chain_id: str
    event: str
    receipt_id: str
    receipt: dict[str, Any]
    prev: str
    mac: str

    def body(self) -> dict[str, Any]:
        """The seven fields the digest and the MAC cover."""
        return {
            "seq": self.seq,
            "ts": self.ts,
            "chain_id": self.chain_id,
            "event": self.event,
            "receipt_id": self.receipt_id,
            "receipt": self.receipt,
            "prev": self.prev,
        }

    def body_bytes(self) -> bytes:
        """RFC 8785 bytes of the body. Raises CanonicalizationError."""
        return canonical_json(self.body()).encode("utf-8")

    def digest(self) -> str:
        """The record digest that the next record's ``prev`` must equal."""
        return record_digest(self.body_bytes())

    def mac_matches(self, key: bytes) -> bool:
        """True when ``mac`` is the HMAC of the body under ``key``."""
        return hmac.compare_digest(self.mac, record_mac(key, self.body_bytes()))

    def to_json_line(self) -> str:
        """The export line (canonical JSON of all eight fields, no trailing newline)."""
        return canonical_json({**self.body(), "mac": self.mac})


_Row = tuple[int, str, str, str, str, str, str, str]


def _body_fields(row: _Row) -> dict[str, Any]:
    """A stored row's first seven columns, named as body_text and line_text take them."""
    seq, ts, chain_id, event, receipt_id, receipt_json, prev, _ = row
    return {"seq": seq, "ts": ts, "chain_id": chain_id, "event": event,
            "receipt_id": receipt_id, "receipt_json": receipt_json, "prev": prev}  # fmt: skip


def _row_body(row: _Row) -> str:
    return body_text(**_body_fields(row))


def _row_line(row: _Row) -> str:
    return line_text(**_body_fields(row), mac=row[7])


def _row_record(row: _Row) -> ChainRecord:
    seq, ts, chain_id, event, receipt_id, receipt_json, prev, mac = row
    try:
        receipt = json.loads(receipt_json)
    except ValueError as exc:
        raise ChainError(f"record {seq} holds a receipt that is not JSON") from exc
    return ChainRecord(seq, ts, chain_id, event, receipt_id, receipt, prev, mac)


# --- the store -------------------------------------------------------------------------------


def _explain(error: BaseException) -> str:
    """A reason a person can act on, from an sqlite3 or OS error."""
    text = str(error)
    lowered = text.lower()
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


_shared_lock = threading.Lock()
_shared: dict[tuple[str, ...], AuditChain] = {}


class AuditChain:
    """The chain in one SQLite file, MACed with the key in ``key_file``.

    Constructing one touches nothing on disk. ``append`` creates the folder, the database
    and the key on first use; ``head``, ``records`` and ``export_lines`` only read.
    """

    def __init__(self, db_path: Path, key_file: Path, *, clock: Callable[[], str] = now_ts) -> None:
        self.db_path = Path(db_path)
        self.key_file = Path(key_file)
        self._clock = clock
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._conn_pid = 0
        self._conn_inode: tuple[int, int] | None = None
        self._chain_id: str | None = None
        self._key_cache: tuple[tuple[int, ...], bytes] | None = None

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, clock: Callable[[], str] = now_ts
    ) -> AuditChain:
        """The chain in ``FLOORGUARD_HOME`` with the key ``FLOORGUARD_CHAIN_KEY_FILE`` names."""
        paths = state_paths(environ)
        return cls(paths.chain_db, paths.chain_key, clock=clock)

    @classmethod
    def shared(cls, environ: Mapping[str, str] | None = None) -> AuditChain:
        """The process's one chain object for the paths ``environ`` names.

        Appends on the spawn path reuse its open connection instead of reopening SQLite
        per decision; the paths are read from the environment at every call, and the
        object reopens its connection by itself after a fork or a replaced database file.
        """
        key = state_key(environ)
        with _shared_lock:
            chain = _shared.get(key)
            if chain is None:
                paths = state_paths(environ)
                chain = _shared[key] = cls(paths.chain_db, paths.chain_key)
            return chain

    def __enter__(self) -> AuditChain:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the cached write connection (appends reopen it)."""
        with self._lock:
            self._drop_connection()

    def exists(self) -> bool:
        """True when the database file exists (it may still hold no records)."""
        return self.db_path.is_file()

    # -- writing --

    def append(self, event: str, receipt: Mapping[str, Any]) -> ChainRecord:
        """Append one receipt and return its record once it is durable on disk.

        Raises ChainWriteError when the record is refused (unknown event, malformed receipt)
        or did not become durable (read-only or full disk, a file or folder in the way, a
        corrupt database, a head record that does not verify with the key), and
        KeyFileError when the key file is unreadable, too open, or not a 32-byte key.
        """
        receipt_json, receipt_obj = self._prepare_receipt(event, receipt)
        receipt_id = record_digest(receipt_json.encode("utf-8"))
        with self._lock:
            row = self._with_busy_retry(
                lambda: self._append_once(event, receipt_id, receipt_json), "append to"
            )
        seq, ts, chain_id, _, _, _, prev, mac = row
        return ChainRecord(seq, ts, chain_id, event, receipt_id, receipt_obj, prev, mac)

    def _prepare_receipt(
        self, event: str, receipt: Mapping[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        if not isinstance(receipt, Mapping):
            raise ChainWriteError("refusing to append: the receipt is not a JSON object")
        try:
            # The record carries exactly what was stored: plain JSON values, read back.
            receipt_json, receipt_obj = _canonical_and_plain(dict(receipt))
        except FloorguardError as exc:
            raise ChainWriteError(f"refusing to append: {exc}") from exc
        if len(receipt_json) > MAX_RECEIPT_BYTES:
            raise ChainWriteError(
                f"refusing to append: the receipt exceeds {MAX_RECEIPT_BYTES} bytes"
            )
        problem = receipt_problem(event, receipt_obj)
        if problem is not None:
            raise ChainWriteError(f"refusing to append: {problem}")
        return receipt_json, receipt_obj

    def _append_in_transaction(
        self, conn: sqlite3.Connection, event: str, receipt_id: str, receipt_json: str
    ) -> _Row:
        head: _Row | None = conn.execute(
            f"SELECT {_COLUMNS} FROM records ORDER BY seq DESC LIMIT 1"  # noqa: S608
        ).fetchone()
        ts = self._clock()
        if head is None:
            key = load_or_create_key(self.key_file)
            meta = conn.execute("SELECT value FROM meta WHERE key = 'chain_id'").fetchone()
            if meta is None:
                chain_id = secrets.token_hex(16)
                conn.execute("INSERT INTO meta (key, value) VALUES ('chain_id', ?)", (chain_id,))
            else:
                chain_id = meta[0]
            self._chain_id = chain_id
            seq, prev = 0, GENESIS_PREV
        else:
            key = self._existing_key()
            chain_id = head[2]
            if self._chain_id is None:
                meta = conn.execute("SELECT value FROM meta WHERE key = 'chain_id'").fetchone()
                self._chain_id = None if meta is None else meta[0]
            if self._chain_id != chain_id:
                raise ChainWriteError(
                    f"cannot append to the audit chain {self.db_path}: its metadata does not "
                    "name the chain its records belong to (the database was altered)"
                )
            head_body = _row_body(head).encode("utf-8")
            if not hmac.compare_digest(head[7], record_mac(key, head_body)):
                raise ChainWriteError(
                    f"cannot append to the audit chain {self.db_path}: its last record "
                    f"(seq {head[0]}) does not verify with the key in {self.key_file} "
                    "(the key was replaced or the record was altered)"
                )
            seq, prev = head[0] + 1, record_digest(head_body)
            # The wall clock may step back; the chain's time may not.
            ts = max(ts, head[1])
        row: _Row = (seq, ts, chain_id, event, receipt_id, receipt_json, prev, "")
        mac = record_mac(key, _row_body(row).encode("utf-8"))
        row = (*row[:7], mac)
        conn.execute(f"INSERT INTO records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)  # noqa: S608
        try:
            if seq > 0 and not _has_leaf(conn, seq - 1):
                _build_tree(conn, seq)  # a chain from before the tree: built once, here
            _add_leaf(conn, seq, merkle.leaf_hash(_row_line(row).encode("utf-8")))
        except ChainWriteError as exc:
            raise ChainWriteError(
                f"cannot append to the audit chain {self.db_path}: {exc} (the database was altered)"
            ) from exc
        return row

    def _append_once(self, event: str, receipt_id: str, receipt_json: str) -> _Row:
        conn = self._writer()
        try:
            conn.execute("BEGIN IMMEDIATE")
            row = self._append_in_transaction(conn, event, receipt_id, receipt_json)
            conn.execute("COMMIT")
        except BaseException:
            _rollback_quietly(conn)
            # A connection that failed may be in any state: start the next try afresh.
            self._drop_connection()
            raise
        return row

    def _with_busy_retry(self, attempt: Callable[[], _T], doing: str) -> _T:
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

    def _existing_key(self) -> bytes:
        """The key of a chain that has records: never created here, re-read when it changes."""
        try:
            info = os.stat(self.key_file)
        except FileNotFoundError:
            raise KeyFileError(
                f"chain key file {self.key_file} is missing but the chain "
                f"{self.db_path} already holds records: restore the key (a new key "
                "would make the existing MACs unverifiable)"
            ) from None
        except OSError as exc:
            raise KeyFileError(
                f"chain key file {self.key_file} is unreadable: {exc.strerror}"
            ) from exc
        # Any rewrite, rename or chmod changes one of these: then read and check it again.
        signature = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size)
        if self._key_cache is None or self._key_cache[0] != signature:
            self._key_cache = (signature, load_key(self.key_file))
        return self._key_cache[1]

    def _writer(self) -> sqlite3.Connection:
        """The cached write connection, reopened after a fork or if the file was replaced.

        Raises sqlite3.Error or OSError (``append`` translates them) and ChainWriteError.
        """
        if self._conn is not None:
            if self._conn_pid == os.getpid() and self._conn_inode == _inode(self.db_path):
                return self._conn
            self._drop_connection()
        conn = self._open_writer()
        self._conn = conn
        self._conn_pid = os.getpid()
        self._conn_inode = _inode(self.db_path)
        return conn

    def _open_writer(self) -> sqlite3.Connection:
        import sqlite3

        home = self.db_path.parent
        if home.exists() and not home.is_dir():
            raise ChainWriteError(
                f"cannot open the audit chain: {home} is not a folder (set FLOORGUARD_HOME "
                "to a folder, or remove the file)"
            )
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.db_path.is_dir():
            raise ChainWriteError(
                f"cannot open the audit chain: {self.db_path} is a folder, not a database"
            )
        # Create it 0600 ourselves; SQLite gives its -wal and -shm files the same mode.
        # O_NONBLOCK and the fstat: a FIFO or device there is refused by name, not waited on.
        fd = os.open(self.db_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ChainWriteError(
                    f"cannot open the audit chain: {self.db_path}: not a regular file"
                )
        finally:
            os.close(fd)
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
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('format', ?)",
                    (CHAIN_FORMAT,),
                )
                stored = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if stored is None or stored[0] != CHAIN_FORMAT:
                    raise ChainWriteError(
                        f"cannot open the audit chain {self.db_path}: unknown format "
                        f"{stored[0] if stored else None!r} (this floorguard writes format "
                        f"{CHAIN_FORMAT})"
                    )
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise
        except BaseException:
            conn.close()
            raise
        return conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # it may already have failed
                self._conn.close()
        self._conn = None
        self._conn_inode = None
        self._chain_id = None

    def ensure_tree(self) -> int:
        """Build the Merkle tree of records the tree does not hold yet; the tree's size.

        Only a chain written before the tree existed needs it (appends keep the tree). It
        writes to an existing database only, never creating one. Raises ChainWriteError.
        """
        if not self.exists():
            return 0

        def attempt() -> int:
            conn = self._writer()
            try:
                conn.execute("BEGIN IMMEDIATE")
                count = _record_count(conn)
                try:
                    _build_tree(conn, count)
                except ChainWriteError as exc:
                    raise ChainWriteError(
                        f"cannot build the Merkle tree of the audit chain {self.db_path}: "
                        f"{exc} (the database was altered)"
                    ) from exc
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                self._drop_connection()
                raise
            return int(count)

        with self._lock:
            return self._with_busy_retry(attempt, "build the Merkle tree of")

    def tree_snapshot(self) -> TreeSnapshot:
        """A read of the records and their tree from one snapshot (a context manager)."""
        return TreeSnapshot(self.db_path)

    # -- reading --

    def head(self) -> ChainRecord | None:
        """The last record, or None when the chain is empty or absent. Raises ChainError."""
        with self._reader() as conn:
            if conn is None:
                return None
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM records ORDER BY seq DESC LIMIT 1"  # noqa: S608
            ).fetchone()
        return None if row is None else _row_record(row)

    def records(
        self, since: datetime | None = None, until: datetime | None = None
    ) -> Iterator[ChainRecord]:
        """The contiguous slice covering [since, until], streamed in seq order.

        It starts at the last record stamped before ``since`` (genesis when there is none,
        or when ``since`` is None) and ends at the first record stamped after ``until``
        (the head when there is none), so that a verifier can see the window is covered.
        Raises ChainError.
        """
        for row in self._slice_rows(since, until):
            yield _row_record(row)

    def export_lines(
        self, since: datetime | None = None, until: datetime | None = None
    ) -> Iterator[str]:
        """The slice of ``records`` as export lines (no newline), without re-canonicalising."""
        for row in self._slice_rows(since, until):
            yield _row_line(row)

    def _slice_rows(self, since: datetime | None, until: datetime | None) -> Iterator[_Row]:
        with self._reader() as conn:
            if conn is None:
                return
            try:
                # One read transaction: the bounds and the rows come from one snapshot.
                conn.execute("BEGIN")
                first, last = 0, None
                bounds = conn.execute("SELECT min(seq), max(seq) FROM records").fetchone()
                low, high = bounds if bounds[0] is not None else (0, -1)
                if since is not None:
                    # The last record stamped before since: the one before the first at or
                    # after it. Bisection relies on timestamps never going backwards
                    # (append enforces it; the verifier checks it).
                    at_or_after = _first_seq_where(conn, low, high, format_ts(since), ">=")
                    first = max(low, at_or_after - 1)
                if until is not None:
                    after = _first_seq_where(conn, low, high, format_ts(until), ">")
                    last = None if after > high else after
                if last is None:
                    cursor = conn.execute(
                        f"SELECT {_COLUMNS} FROM records WHERE seq >= ? ORDER BY seq",  # noqa: S608
                        (first,),
                    )
                else:
                    cursor = conn.execute(
                        f"SELECT {_COLUMNS} FROM records WHERE seq BETWEEN ? AND ? "  # noqa: S608
                        "ORDER BY seq",
                        (first, last),
                    )
                while batch := cursor.fetchmany(512):
                    yield from batch
            except Exception as exc:
                if _is_storage_error(exc):
                    raise ChainError(
                        f"cannot read the audit chain {self.db_path}: {_explain(exc)}"
                    ) from exc
                raise

    def _reader(self) -> _ReadConnection:
        return _ReadConnection(self.db_path)


class TreeSnapshot:
    """Records and tree hashes read in one transaction: what proofs are made of.

    ``size`` is the number of records the tree holds (``AuditChain.ensure_tree`` first
    makes that every record). Raises ChainError on storage errors.
    """

    def __init__(self, db_path: Path) -> None:
        self._reader = _ReadConnection(db_path)
        self._conn: sqlite3.Connection | None = None
        self.size = 0
        self.records = 0

    def __enter__(self) -> TreeSnapshot:
        conn = self._reader.__enter__()
        if conn is None:
            return self
        self._conn = conn
        try:
            conn.execute("BEGIN")
            has_tree = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tree'"
            ).fetchone()
            self.records = _record_count(conn)
            self.size = _tree_size(conn) if has_tree else 0
        except Exception as exc:
            self._fail(exc)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._conn = None
        self._reader.__exit__(*exc_info)

    def _fail(self, exc: Exception) -> None:
        if _is_storage_error(exc):
            raise ChainError(
                f"cannot read the audit chain {self._reader._path}: {_explain(exc)}"
            ) from exc
        raise exc

    def subtree(self, level: int, index: int) -> bytes:
        """The stored hash of complete subtree (level, index). Raises ChainError."""
        if self._conn is None:
            raise ChainError("the audit chain has no Merkle tree")
        try:
            row = self._conn.execute(
                "SELECT hash FROM tree WHERE level = ? AND idx = ?", (level, index)
            ).fetchone()
        except Exception as exc:
            self._fail(exc)
            raise
        if row is None or not isinstance(row[0], bytes) or len(row[0]) != merkle.HASH_SIZE:
            raise ChainError(
                f"the Merkle tree of the audit chain {self._reader._path} lacks subtree "
                f"({level}, {index}) (the database was altered)"
            )
        return bytes(row[0])

    def line(self, seq: int) -> str | None:
        """The export line of record ``seq``, or None when there is none."""
        if self._conn is None:
            return None
        try:
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM records WHERE seq = ?",  # noqa: S608
                (seq,),
            ).fetchone()
        except Exception as exc:
            self._fail(exc)
            raise
        return None if row is None else _row_line(row)

    def seq_of(self, receipt_id: str) -> int | None:
        """The seq of the first record of receipt ``receipt_id``, or None."""
        if self._conn is None:
            return None
        try:
            row = self._conn.execute(
                "SELECT min(seq) FROM records WHERE receipt_id = ?", (receipt_id,)
            ).fetchone()
        except Exception as exc:
            self._fail(exc)
            raise
        return None if row is None or row[0] is None else int(row[0])


def _record_count(conn: sqlite3.Connection) -> int:
    """Records are seq 0..n-1 (append makes them so; count(*) would scan the table)."""
    row = conn.execute("SELECT max(seq) FROM records").fetchone()
    return 0 if row is None or row[0] is None else int(row[0]) + 1


def _has_leaf(conn: sqlite3.Connection, index: int) -> bool:
    found = conn.execute("SELECT 1 FROM tree WHERE level = 0 AND idx = ?", (index,)).fetchone()
    return found is not None


def _tree_size(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(idx) FROM tree WHERE level = 0").fetchone()
    return 0 if row is None or row[0] is None else int(row[0]) + 1


def _is_hash(value: object) -> bool:
    # A stored hash of another type or length is an altered tree: never hashed onward.
    return isinstance(value, bytes) and len(value) == merkle.HASH_SIZE


def _add_leaf(conn: sqlite3.Connection, index: int, leaf: bytes) -> None:
    """Store leaf ``index`` and every subtree it completes (its left siblings are stored)."""
    rows = [(0, index, leaf)]
    current, level, at = leaf, 0, index
    while at & 1:
        left = conn.execute(
            "SELECT hash FROM tree WHERE level = ? AND idx = ?", (level, at - 1)
        ).fetchone()
        if left is None or not _is_hash(left[0]):
            raise ChainWriteError(f"the Merkle tree lacks subtree ({level}, {at - 1})")
        current = merkle.node_hash(left[0], current)
        level, at = level + 1, at >> 1
        rows.append((level, at, current))
    _insert_nodes(conn, rows)


def _build_tree(conn: sqlite3.Connection, upto: int) -> None:
    """Add the leaves the tree lacks below ``upto``, from the records as they are stored."""
    start = _tree_size(conn)
    if start >= upto:
        return

    def stored(level: int, index: int) -> bytes:
        row = conn.execute(
            "SELECT hash FROM tree WHERE level = ? AND idx = ?", (level, index)
        ).fetchone()
        if row is None or not _is_hash(row[0]):
            raise ChainWriteError(f"the Merkle tree lacks subtree ({level}, {index})")
        return bytes(row[0])

    edge = merkle.CompactRange.of(start, stored)
    cursor = conn.execute(
        f"SELECT {_COLUMNS} FROM records WHERE seq >= ? AND seq < ? ORDER BY seq",  # noqa: S608
        (start, upto),
    )
    pending: list[tuple[int, int, bytes]] = []
    expected = start
    while batch := cursor.fetchmany(2048):
        for row in batch:
            if row[0] != expected:
                raise ChainWriteError(f"the audit chain has no record {expected}")
            expected += 1
            pending.extend(edge.append(merkle.leaf_hash(_row_line(row).encode("utf-8"))))
        _insert_nodes(conn, pending)
        pending.clear()
    if expected != upto:
        raise ChainWriteError(f"the audit chain has no record {expected}")


def _insert_nodes(conn: sqlite3.Connection, rows: Iterable[tuple[int, int, bytes]]) -> None:
    import sqlite3  # loaded already: conn is one of its connections

    try:
        conn.executemany("INSERT INTO tree (level, idx, hash) VALUES (?, ?, ?)", rows)
    except sqlite3.IntegrityError as exc:
        # Only a row written for a record that did not exist yet can be in the way.
        raise ChainWriteError("the Merkle tree holds subtrees of records not yet appended") from exc


class _ReadConnection:
    """A read-only connection for one read; None when there is no database at all."""

    def __init__(self, db_path: Path) -> None:
        self._path = db_path
        self._conn: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection | None:
        import sqlite3

        if not self._path.exists():
            return None
        if not self._path.is_file():
            raise ChainError(f"cannot read the audit chain: {self._path} is not a file")
        _refuse_odd_companions(self._path, ChainError)
        uri = self._path.absolute().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(
                uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None
            )
            has_table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'records'"
            ).fetchone()
        except sqlite3.Error as exc:
            raise ChainError(f"cannot read the audit chain {self._path}: {_explain(exc)}") from exc
        if has_table is None:
            conn.close()
            # A database with no records table yet is an empty chain, nothing more.
            return None
        self._conn = conn
        return conn

    def __exit__(self, *exc_info: object) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _is_storage_error(exc: BaseException) -> bool:
    import sqlite3

    return isinstance(exc, sqlite3.Error | OSError)


def _first_seq_where(
    conn: sqlite3.Connection, low: int, high: int, stamp: str, relation: str
) -> int:
    """The first seq in [low, high] whose ts is ``>=`` (or ``>``) stamp; high + 1 if none."""
    while low <= high:
        middle = (low + high) // 2
        row = conn.execute("SELECT ts FROM records WHERE seq = ?", (middle,)).fetchone()
        ts = "" if row is None else row[0]
        if (ts >= stamp) if relation == ">=" else (ts > stamp):
            high = middle - 1
        else:
            low = middle + 1
    return low


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


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


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
