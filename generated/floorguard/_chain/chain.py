"""The audit chain: every receipt floorguard issues, in one linked, authenticated log.

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

The ``mac`` field is the record's authenticator: the HMAC under the chain (fleet) key, or,
on a host with its own key (``FLOORGUARD_HOST_KEY_FILE``), that host's Ed25519 signature
``ed25519:<key id>:<signature>`` over the same body (``floorguard._chain.record_signature``). Any
holder of the fleet key, the database owner who made it included, can recompute MACs; only
a host can make its signatures. A host that signs never reads the fleet key.

An exported slice is JSON Lines: one record a line, written as the RFC 8785 canonical JSON
of all eight fields (verifiers accept any JSON spelling of a line, but refuse duplicate keys).

Timestamps never go backwards along the chain: an append stamped earlier than the head
(the wall clock stepped back) takes the head's timestamp, so that time windows map onto
contiguous runs of records. A shared chain's records take the database server's time, not
the appending host's: a host whose clock runs ahead would otherwise stamp every later
record of the fleet with its future (and push them out of every time window).

Storage: behind ``floorguard.chainstore`` (one small interface, two stores). By default
``chain.sqlite3`` in FLOORGUARD_HOME (``chainstore.sqlite``); with ``FLOORGUARD_CHAIN_URL``
a PostgreSQL database shared by many hosts (``chainstore.postgres``). Every append is one
serialised transaction that reads the head and inserts the next record, so appends from
many processes (and hosts) form one linear chain, and ``append`` returns only once the
record is durable (committed). The stores are imported on first use.

The Merkle tree: the records are also the leaves, in seq order, of an RFC 6962 tree whose
leaf input is a record's export line (``floorguard._crypto.merkle``). The table ``tree`` keeps every
complete subtree hash, keyed by (level, index); each append adds its leaf and the subtrees
it completes in the same transaction as the record, so any inclusion or consistency proof
needs O(log n) lookups. A chain written before the tree existed gets its tree built from its
records, unchanged, on first use (the next append, or ``ensure_tree``).

The host as a witness: a chain opened from the environment (``from_env``, ``shared``)
remembers in FLOORGUARD_HOME the largest tree it has seen of each chain
(``floorguard._chain.chain_view``), and an append first checks, inside its transaction, that the
store's tree extends it: a smaller tree (a rollback) or another root for the remembered
size (a fork) refuses the append with ChainRollbackError, recorded on the host. The check
reads the remembered size's left-edge nodes, and the new root comes from the right edge
the new leaf is hashed with: no extra round trip when the store prefetches them.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floorguard._base._canonical import ZERO_DIGEST, canonical_bytes, plain_json_text
from floorguard._base._time import format_ts, now_ts, parse_ts
from floorguard._base.state import CHAIN_URL_ENV, state_key, state_paths
from floorguard._chain import record_signature
from floorguard._chain.chain_key import key_check, load_key, load_or_create_key
from floorguard._chain.chain_view import AppendWitness, ChainViews
from floorguard._chain.record_signature import FileCache, HostKey, HostKeys
from floorguard._crypto import merkle
from floorguard.chainstore.interface import CHAIN_FORMAT, AheadMissed, Node, Row
from floorguard.chainstore.sqlite import BUSY_TIMEOUT_SECONDS
from floorguard.errors import (
    CanonicalizationError,
    ChainError,
    ChainRollbackError,
    ChainWriteError,
    FloorguardError,
    KeyFileError,
)

if TYPE_CHECKING:
    from floorguard.chainstore.interface import ChainStore, ReadView, WriteView

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
MAX_RECEIPT_BYTES = 1 << 20
GENESIS_PREV = ZERO_DIGEST
_HEX = frozenset("0123456789abcdef")


# --- canonical bytes, fast -------------------------------------------------------------------
# (floorguard._base._canonical says when json's output is RFC 8785; this is its text-level check
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
    """True for a well-formed authenticator: an HMAC (64 lowercase hex characters) or a host
    signature (``ed25519:<16 hex>:<128 hex>``)."""
    return record_signature.is_hmac(text) or record_signature.is_signature(text)


def receipt_problem(event: str, receipt: object) -> str | None:
    """Why ``receipt`` cannot be recorded under ``event``, or None when it can."""
    if event not in EVENTS:
        return f"unknown event {event!r} (allowed: {', '.join(sorted(EVENTS))})"
    if not isinstance(receipt, dict):
        return "receipt is not a JSON object"
    kind = receipt.get("kind")
    if kind != event:
        return f"receipt kind {kind!r} does not match event {event!r}"
    if "schema_version" not in receipt:
        return "receipt has no schema_version (a positive integer)"
    version = receipt["schema_version"]
    if type(version) is not int or version < 1:
        # json.dumps: 1.0 and true read back as 1 in Python; say what the receipt holds.
        return f"receipt schema_version is not a positive JSON integer ({json.dumps(version)})"
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
        """True when ``mac`` is the HMAC of the body under ``key`` (False for a host
        signature: ``record_signature.HostKeys.check`` checks those)."""
        return hmac.compare_digest(self.mac, record_mac(key, self.body_bytes()))

    def to_json_line(self) -> str:
        """The export line (canonical JSON of all eight fields, no trailing newline)."""
        return canonical_json({**self.body(), "mac": self.mac})


_Row = Row
# Quoted by other modules from here.
__all__ = ["BUSY_TIMEOUT_SECONDS", "CHAIN_FORMAT"]


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


# --- the chain over its store ----------------------------------------------------------------


_shared_lock = threading.Lock()
_shared: dict[tuple[str, ...], AuditChain] = {}


class AuditChain:
    """The chain in a store (a SQLite file by default), MACed with the key in ``key_file``,
    or signed with this host's key in ``host_key_file`` when one is given.

    ``store`` is a ChainStore, or the path of a SQLite database. Constructing one touches
    nothing; ``append`` creates a SQLite database and its HMAC key on first use (never an
    HMAC key when it signs); ``head``, ``records`` and ``export_lines`` only read.
    ``host_keys_file`` is the fleet's host-keys document: appends check a signed head with
    it, and ``verification_keys`` hands it to verifiers. With ``views`` (``from_env`` gives
    the host's), every append is checked against, and grows, what this host has seen.
    """

    def __init__(
        self,
        store: ChainStore | str | os.PathLike[str],
        key_file: Path,
        *,
        clock: Callable[[], str] | None = None,
        host_key_file: Path | None = None,
        host_keys_file: Path | None = None,
        views: ChainViews | None = None,
    ) -> None:
        if isinstance(store, str | os.PathLike):
            from floorguard.chainstore.sqlite import SqliteStore

            store = SqliteStore(Path(store))
        self.store: ChainStore = store
        self.key_file = Path(key_file)
        self._clock = clock
        self._lock = threading.Lock()
        self._chain_id: str | None = None
        self._key_cache: tuple[tuple[int, ...], bytes] | None = None
        # The body and mac of the last record this object wrote: a signed head equal to it
        # needs no check (its own signature over those very bytes), which spares a verify.
        self._written: tuple[bytes, str] | None = None
        self.host_key_file = None if host_key_file is None else Path(host_key_file)
        self.host_keys_file = None if host_keys_file is None else Path(host_keys_file)
        self._host_key: FileCache[HostKey] = FileCache(record_signature.load_host_key)
        self._host_keys: FileCache[HostKeys] = FileCache(record_signature.load_host_keys)
        self.views = views
        # (chain_id, HMAC key) already checked against the chain's key_check
        self._key_checked: tuple[str | None, bytes] | None = None

    @property
    def location(self) -> str:
        """The store's name in messages: a path, or a URL without its password."""
        return self.store.location

    @property
    def db_path(self) -> Path:
        """The SQLite file of a SQLite chain (AttributeError for another store)."""
        path: Path = getattr(self.store, "db_path")  # noqa: B009
        return path

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, clock: Callable[[], str] | None = None
    ) -> AuditChain:
        """The chain the environment selects (``FLOORGUARD_CHAIN_URL``, else the SQLite file
        in ``FLOORGUARD_HOME``) with the key ``FLOORGUARD_CHAIN_KEY_FILE`` names, this
        host's signing key ``FLOORGUARD_HOST_KEY_FILE``, the host-keys document
        ``FLOORGUARD_HOST_KEYS`` and this host's memory of the chain (``chain_view``).
        Raises ChainError for an unusable ``FLOORGUARD_CHAIN_TIMEOUT``."""
        from floorguard.chainstore import store_from_env, timeout_from_env

        env = os.environ if environ is None else environ
        paths = state_paths(env)
        store = store_from_env(env)
        # A shared chain's append waits for the host's view lock no longer than for the
        # chain's own lock; a local one as long as SQLite waits for its own.
        wait = timeout_from_env(env) if env.get(CHAIN_URL_ENV) else BUSY_TIMEOUT_SECONDS
        return cls(
            store,
            paths.chain_key,
            clock=clock,
            host_key_file=paths.host_key,
            host_keys_file=paths.host_keys,
            views=ChainViews(paths.chain_view, lock_wait=wait),
        )

    @classmethod
    def shared(cls, environ: Mapping[str, str] | None = None) -> AuditChain:
        """The process's one chain object for the store and key ``environ`` names.

        Appends on the spawn path reuse its open connection instead of reopening the store
        per decision; the variables are read from the environment at every call, and the
        store reopens its connection by itself after a fork (or a replaced SQLite file).
        """
        key = state_key(environ)
        with _shared_lock:
            chain = _shared.get(key)
            if chain is None:
                chain = _shared[key] = cls.from_env(environ)
            return chain

    def __enter__(self) -> AuditChain:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store's cached connections (appends reopen them)."""
        with self._lock:
            self.store.close()
            self._chain_id = None

    def exists(self) -> bool:
        """True when the store exists (it may still hold no records). Raises ChainError."""
        return self.store.exists()

    # -- writing --

    def append(self, event: str, receipt: Mapping[str, Any]) -> ChainRecord:
        """Append one receipt and return its record once it is durable.

        With a host key the record is signed with it, and the fleet's HMAC key is never read;
        else it is MACed with the HMAC key. Raises ChainWriteError when the record is refused
        (unknown event, malformed receipt) or did not become durable (read-only or full disk,
        a file or folder in the way, a corrupt database, an unreachable or timed-out database
        server, a head record that does not verify: see ``_check_head``), and KeyFileError
        when a key file is missing where it must exist, unreadable, too open, or not a key of
        its kind (an unusable host key is never replaced by the HMAC key).
        """
        receipt_json, receipt_obj = self._prepare_receipt(event, receipt)
        receipt_id = record_digest(receipt_json.encode("utf-8"))
        budget = self.store.write_budget
        deadline = None if budget is None else time.monotonic() + budget
        with self._lock, contextlib.ExitStack() as stack:
            # Read before the store's lock is taken: a bad key refuses without waiting.
            signer = self._signer()
            host_keys = self._listed_hosts()
            witness = None
            if self.views is not None:
                witness = stack.enter_context(
                    AppendWitness(self.views, self.location, deadline=deadline)
                )
            try:
                row, root = self.store.write(
                    lambda view: self._append_in_transaction(
                        view,
                        event,
                        receipt_id,
                        receipt_json,
                        witness,
                        signer=signer,
                        host_keys=host_keys,
                    ),
                    "append to",
                    known_size=None if self.views is None else self.views.hint(self._chain_id),
                    deadline=deadline,
                    ahead=True,
                )
            except BaseException:
                self._chain_id = None  # re-read it with the next connection
                raise
            self._written = (_row_body(row).encode("utf-8"), row[7])
            seq, ts, chain_id, _, _, _, prev, mac = row
            if witness is not None:
                try:
                    witness.grow(chain_id, seq + 1, root)
                except ChainWriteError as exc:
                    raise ChainWriteError(
                        f"record {seq} was appended to the audit chain {self.location}, but "
                        f"this host could not remember it: {exc}"
                    ) from exc
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
        if len(receipt_json.encode("utf-8")) > MAX_RECEIPT_BYTES:
            raise ChainWriteError(
                f"refusing to append: the receipt exceeds {MAX_RECEIPT_BYTES} bytes"
            )
        from floorguard._chain.receipts import shape_problem

        # What verify chain would refuse is never written: the same shape check.
        problem = shape_problem(event, receipt_obj)
        if problem is not None:
            raise ChainWriteError(f"refusing to append: {problem}")
        return receipt_json, receipt_obj

    def _signer(self) -> HostKey | None:
        """This host's signing key, when it has one (re-read when the file changes)."""
        if self.host_key_file is None:
            return None
        return self._host_key.get(self.host_key_file, "host key file")

    def _listed_hosts(self) -> HostKeys | None:
        """The fleet's host-keys document, when one is configured."""
        if self.host_keys_file is None:
            return None
        return self._host_keys.get(self.host_keys_file, "host keys file")

    def verification_keys(self) -> tuple[bytes | None, HostKeys | None]:
        """What this host checks the chain's records with: the fleet's HMAC key and the
        host-keys document, each as configured; a host that signs and has no host-keys
        document trusts its own key alone (enough for a chain only it writes, such as a
        SQLite one). When there are host keys, a missing HMAC key is no error (HMAC records
        then fail as unverified); when there are none, the HMAC key must be there, as before
        host signatures. Raises KeyFileError."""
        host_keys = self._listed_hosts()
        if host_keys is None:
            own = self._signer()
            host_keys = None if own is None else own.alone()
        if host_keys is not None and not os.path.lexists(self.key_file):
            return None, host_keys
        return load_key(self.key_file), host_keys

    def _append_in_transaction(
        self,
        view: WriteView,
        event: str,
        receipt_id: str,
        receipt_json: str,
        witness: AppendWitness | None = None,
        *,
        signer: HostKey | None = None,
        host_keys: HostKeys | None = None,
    ) -> tuple[_Row, bytes]:
        """Write the next record and its tree nodes in ``view``'s transaction; the record
        and the new tree's root. With ``witness``, the store's tree is checked against what
        this host has seen first."""
        head = view.head()
        # A clock given explicitly (tests) wins; else the store's shared one, else ours.
        ts = self._clock() if self._clock is not None else (view.clock() or now_ts())
        key: bytes | None = None
        if head is None:
            chain_id = view.meta("chain_id")
            if chain_id is None:
                chain_id = secrets.token_hex(16)
                view.insert_meta("chain_id", chain_id)
            self._chain_id = chain_id
            if signer is None:  # (checked for this chain: the next append need not again)
                key = self._genesis_key(view)
            seq, prev = 0, GENESIS_PREV
        else:
            if signer is None:
                key = self._existing_key()
            chain_id = head[2]
            if self._chain_id is None:
                self._chain_id = view.meta("chain_id")
            if self._chain_id != chain_id:
                raise ChainWriteError(
                    f"cannot append to the audit chain {self.location}: its metadata does not "
                    "name the chain its records belong to (the database was altered)"
                )
            head_body = _row_body(head).encode("utf-8")
            if key is not None:
                # The chain's check value says whether this host's HMAC key is the fleet's
                # (once per key and chain): a host with another key must not write, and a
                # head that does not verify is no refusal on a shared chain (_check_head).
                self._check_key_against_meta(view, key)
            self._check_head(head, head_body, key, signer, host_keys)
            seq, prev = head[0] + 1, record_digest(head_body)
            # The wall clock may step back; the chain's time may not.
            ts = max(ts, head[1])
        row: _Row = (seq, ts, chain_id, event, receipt_id, receipt_json, prev, "")
        body = _row_body(row).encode("utf-8")
        mac = signer.sign(body) if signer is not None else record_mac(_known(key), body)
        row = (*row[:7], mac)
        view.insert_record(row)
        nodes: dict[tuple[int, int], bytes] = {}

        def stored(level: int, index: int) -> bytes:
            found = nodes.get((level, index))
            if found is None:
                found = view.subtree(level, index)
                if found is None or not _is_hash(found):
                    raise ChainWriteError(f"the Merkle tree lacks subtree ({level}, {index})")
                nodes[(level, index)] = found
            return found

        try:
            if seq > 0 and view.subtree(0, seq - 1) is None:
                _build_tree(view, seq)  # a chain from before the tree: built once, here
            # The right edge of the tree before this record: the nodes its leaf is hashed
            # with, and with them the new root.
            edge = merkle.CompactRange.of(seq, stored)
            if witness is not None and view.ahead:
                # Ahead, the tree read is this process's own last one: only the one this
                # host remembers will do (another process may have grown it since).
                if not witness.agrees(chain_id, seq, stored):
                    raise AheadMissed
            elif witness is not None:
                witness.check(chain_id, seq, stored, lambda: {
                    "event": event, "receipt_id": receipt_id, "receipt": json.loads(receipt_json)
                })  # fmt: skip
            view.insert_nodes(edge.append(merkle.leaf_hash(_row_line(row).encode("utf-8"))))
        except ChainRollbackError:
            raise
        except ChainWriteError as exc:
            raise ChainWriteError(
                f"cannot append to the audit chain {self.location}: {exc} "
                "(the database was altered)"
            ) from exc
        return row, edge.root()

    def _genesis_key(self, view: WriteView) -> bytes:
        """The HMAC key the first record is MACed with, checked against a shared chain's
        ``key_check`` (a host that signs has no HMAC key, and nothing to check)."""
        key = load_or_create_key(self.key_file) if self.store.creates_key else self._key()
        self._check_key_against_meta(view, key)  # a shared chain's, from `floorctl chain init`
        return key

    def _check_key_against_meta(self, view: WriteView, key: bytes) -> None:
        """Refuse an HMAC key that is not the one a shared chain was initialised with."""
        checked = (self._chain_id, key)
        if self._key_checked == checked:
            return
        expected = view.meta("key_check")
        if expected is not None and not hmac.compare_digest(expected, key_check(key)):
            raise ChainWriteError(
                f"cannot append to the audit chain {self.location}: the key in "
                f"{self.key_file} is not the chain's key (the one `floorctl chain init` "
                "wrote; copy that file to this host)"
            )
        self._key_checked = checked

    def _check_head(
        self,
        head: _Row,
        head_body: bytes,
        key: bytes | None,
        signer: HostKey | None,
        host_keys: HostKeys | None,
    ) -> None:
        """Refuse to append after a last record that does not verify with what this host has.

        An HMAC head is checked with the HMAC key; a host that signs holds no HMAC key and
        accepts an HMAC head by its form (a chain moving from the fleet key to host keys
        has HMAC records before signed ones). A signed head is checked with the host-keys
        document (``FLOORGUARD_HOST_KEYS``) when there is one, else with this host's own key
        when it is this host's, else by its form only: without the fleet's public keys a
        host cannot check another host's signature, and the auditor (``verify chain
        --host-keys``) does. The record this object last wrote needs no check while it is
        the head unchanged. A head whose mac has neither form is refused.

        On a shared chain a head that does not verify is not refused but recorded (the
        host's refusals file, and a warning): any one host can append a well-formed record
        with a wrong signature or MAC, and refusing after it would let that host stop every
        other. The record stays in the chain, linked, for the audit to name.
        """
        mac = head[7]
        where = f"the audit chain {self.location}: its last record (seq {head[0]})"
        if record_signature.is_hmac(mac):
            if key is not None and not hmac.compare_digest(mac, record_mac(key, head_body)):
                self._unverified_head(
                    head,
                    f"{where} does not verify with the key in {self.key_file} "
                    "(the key was replaced or the record was altered)",
                )
            return
        kid = record_signature.signature_key_id(mac)
        if kid is None:
            raise ChainWriteError(
                f"cannot append to {where} has a mac that is neither an HMAC nor a host signature "
                "(the database was altered)"
            )
        written = self._written
        if written is not None and written[1] == mac and written[0] == head_body:
            return  # the record this host signed and committed, byte for byte
        if host_keys is not None:
            _, problem = host_keys.check(mac, head_body)
            if problem is not None:
                self._unverified_head(head, f"{where}: {problem}")
        elif signer is not None and kid == signer.key_id and not signer.verifies(mac, head_body):
            self._unverified_head(
                head,
                f"{where} does not verify with this host's key {signer.path}, which signed it "
                "(the record was altered, or forged under this host's key id)",
            )

    def _unverified_head(self, head: _Row, message: str) -> None:
        """A last record that does not verify: refused on a chain only this host writes;
        on a shared one recorded on this host, and appended after (see _check_head)."""
        if self.store.creates_key:  # a local file: no other host writes it
            raise ChainWriteError(f"cannot append to {message}")
        import logging

        if self.views is not None:  # (a chain built by hand, without the host's files, logs)
            self.views.record({
                "ts": now_ts(), "event": "unverified-head", "location": self.location,
                "seq": head[0], "mac": head[7], "message": message, "pid": os.getpid(),
            })  # fmt: skip
        logging.getLogger("floorguard").warning("floorguard: %s; appended after it", message)

    def _key(self) -> bytes:
        """The key of a chain whose key is made elsewhere (a shared database's)."""
        if not self.key_file.exists():
            raise KeyFileError(
                f"chain key file {self.key_file} is missing: a shared audit chain "
                f"({self.location}) never creates its key; copy the fleet's chain key there "
                "(the one `floorctl chain init` wrote) or set FLOORGUARD_CHAIN_KEY_FILE"
            )
        return self._existing_key()

    def _existing_key(self) -> bytes:
        """The key of a chain that has records: never created here, re-read when it changes."""
        try:
            info = os.stat(self.key_file)
        except FileNotFoundError:
            raise KeyFileError(
                f"chain key file {self.key_file} is missing but the chain "
                f"{self.location} already holds records: restore the key (a new key "
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

    def ensure_tree(self) -> int:
        """Build the Merkle tree of records the tree does not hold yet; the tree's size.

        Only a chain written before the tree existed needs it (appends keep the tree). It
        writes to an existing database only, never creating one. Raises ChainWriteError.
        """
        if not self.exists():
            return 0

        def attempt(view: WriteView) -> int:
            count = view.record_count()
            try:
                _build_tree(view, count)
            except ChainWriteError as exc:
                raise ChainWriteError(
                    f"cannot build the Merkle tree of the audit chain {self.location}: "
                    f"{exc} (the database was altered)"
                ) from exc
            return count

        with self._lock:
            return self.store.write(attempt, "build the Merkle tree of")

    def tree_snapshot(self) -> TreeSnapshot:
        """A read of the records and their tree from one snapshot (a context manager)."""
        return TreeSnapshot(self.store)

    # -- reading --

    def head(self) -> ChainRecord | None:
        """The last record, or None when the chain is empty or absent. Raises ChainError."""
        with self.store.read() as view:
            row = None if view is None else view.head()
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
        # One snapshot: the bounds and the rows come from one transaction.
        with self.store.read() as view:
            if view is None:
                return
            first, last = 0, None
            high = view.record_count() - 1
            if since is not None:
                # The last record stamped before since: the one before the first at or
                # after it. Bisection relies on timestamps never going backwards
                # (append enforces it; the verifier checks it).
                at_or_after = _first_seq_where(view, 0, high, format_ts(since), ">=")
                first = max(0, at_or_after - 1)
            if until is not None:
                after = _first_seq_where(view, 0, high, format_ts(until), ">")
                last = None if after > high else after
            yield from view.rows(first, last)


class TreeSnapshot:
    """Records and tree hashes read in one transaction: what proofs are made of.

    ``size`` is the number of records the tree holds (``AuditChain.ensure_tree`` first
    makes that every record). Raises ChainError on storage errors.
    """

    def __init__(self, store: ChainStore) -> None:
        self._store = store
        self._reading: contextlib.AbstractContextManager[ReadView | None] | None = None
        self._view: ReadView | None = None
        self.size = 0
        self.records = 0

    def __enter__(self) -> TreeSnapshot:
        self._reading = self._store.read()
        view = self._reading.__enter__()
        if view is None:
            return self
        try:
            self.records = view.record_count()
            self.size = view.tree_size()
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

    def subtree(self, level: int, index: int) -> bytes:
        """The stored hash of complete subtree (level, index). Raises ChainError."""
        if self._view is None:
            raise ChainError("the audit chain has no Merkle tree")
        found = self._view.subtree(level, index)
        if found is None or len(found) != merkle.HASH_SIZE:
            raise ChainError(
                f"the Merkle tree of the audit chain {self._store.location} lacks subtree "
                f"({level}, {index}) (the database was altered)"
            )
        return found

    def lines(self) -> Iterator[str]:
        """Every record's export line, in seq order, streamed."""
        if self._view is not None:
            for row in self._view.rows(0, None):
                yield _row_line(row)

    def nodes(self) -> Iterator[Node]:
        """Every stored tree node, in the order a tree built leaf by leaf completes them."""
        if self._view is not None:
            yield from self._view.nodes()

    def line(self, seq: int) -> str | None:
        """The export line of record ``seq``, or None when there is none."""
        if self._view is None:
            return None
        row = self._view.row(seq)
        return None if row is None else _row_line(row)

    def seq_of(self, receipt_id: str) -> int | None:
        """The seq of the first record of receipt ``receipt_id``, or None."""
        if self._view is None:
            return None
        return self._view.first_seq_of(receipt_id)


def _known(key: bytes | None) -> bytes:
    if key is None:  # pragma: no cover - an append loads its key or its signer first
        raise KeyFileError("no key to authenticate the record with")
    return key


def _is_hash(value: object) -> bool:
    # A stored hash of another type or length is an altered tree: never hashed onward.
    return isinstance(value, bytes) and len(value) == merkle.HASH_SIZE


def _build_tree(view: WriteView, upto: int) -> None:
    """Add the leaves the tree lacks below ``upto``, from the records as they are stored."""
    start = view.tree_size()
    if start >= upto:
        return

    def stored(level: int, index: int) -> bytes:
        found = view.subtree(level, index)
        if found is None or not _is_hash(found):
            raise ChainWriteError(f"the Merkle tree lacks subtree ({level}, {index})")
        return found

    edge = merkle.CompactRange.of(start, stored)
    pending: list[tuple[int, int, bytes]] = []
    expected = start
    for row in view.rows(start, upto - 1):
        if row[0] != expected:
            raise ChainWriteError(f"the audit chain has no record {expected}")
        expected += 1
        pending.extend(edge.append(merkle.leaf_hash(_row_line(row).encode("utf-8"))))
        if len(pending) >= 4096:
            view.insert_nodes(pending)
            pending.clear()
    if expected != upto:
        raise ChainWriteError(f"the audit chain has no record {expected}")
    view.insert_nodes(pending)


def _first_seq_where(view: ReadView, low: int, high: int, stamp: str, relation: str) -> int:
    """The first seq in [low, high] whose ts is ``>=`` (or ``>``) stamp; high + 1 if none."""
    while low <= high:
        middle = (low + high) // 2
        ts = view.ts_at(middle) or ""
        if (ts >= stamp) if relation == ">=" else (ts > stamp):
            high = middle - 1
        else:
            low = middle + 1
    return low
