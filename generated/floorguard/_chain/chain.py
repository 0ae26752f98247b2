"""The audit chain: every receipt floorguard issues, in one linked, authenticated log.

The record format (fields, canonical body, digest, MAC, export line) is
``floorguard._chain.chain_record``'s; the tree's building and snapshots are
``floorguard._chain.chain_tree``'s. Their names are imported here too, where callers have
long found them.

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
import functools
import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floorguard._base._canonical import MAX_NESTING, nests_deeper_than
from floorguard._base._time import format_ts, now_ts
from floorguard._base.state import CHAIN_URL_ENV, state_key, state_paths
from floorguard._chain import record_signature
from floorguard._chain.chain_key import key_check, load_key, load_or_create_key
from floorguard._chain.chain_record import (
    BODY_FIELDS,
    COMPACT_SORTED,
    EVENTS,
    GENESIS_PREV,
    JSON_STRING,
    MAX_RECEIPT_BYTES,
    RECORD_FIELDS,
    ChainRecord,
    _canonical_and_plain,
    _Row,
    _row_body,
    _row_line,
    _row_record,
    body_text,
    canonical_json,
    is_chain_id,
    is_mac,
    line_text,
    parse_any_ts,
    receipt_problem,
    record_digest,
    record_mac,
)
from floorguard._chain.chain_tree import TreeSnapshot, _build_tree, _is_hash
from floorguard._chain.chain_view import AppendWitness, ChainViews
from floorguard._chain.receipts import shape_problem
from floorguard._chain.record_signature import FileCache, HostKey, HostKeys
from floorguard._crypto import merkle
from floorguard._crypto.hmac_sha256 import HmacSha256
from floorguard.chainstore.interface import CHAIN_FORMAT, AheadMissed, AheadView
from floorguard.chainstore.sqlite import BUSY_TIMEOUT_SECONDS
from floorguard.errors import (
    ChainRollbackError,
    ChainWriteError,
    FloorguardError,
    HostViewError,
    KeyFileError,
    cut_hidden_context,
)

if TYPE_CHECKING:
    from floorguard.chainstore.interface import ChainStore, FirstReads, ReadView, WriteView

# Quoted by other modules from here: the chain's own names, and those of the record format
# and the tree that callers import from this module.
__all__ = [
    "BODY_FIELDS",
    "BUSY_TIMEOUT_SECONDS",
    "CHAIN_FORMAT",
    "COMPACT_SORTED",
    "EVENTS",
    "GENESIS_PREV",
    "JSON_STRING",
    "MAX_RECEIPT_BYTES",
    "RECORD_FIELDS",
    "AuditChain",
    "ChainRecord",
    "TreeSnapshot",
    "_row_body",
    "_row_line",
    "body_text",
    "canonical_json",
    "is_chain_id",
    "is_mac",
    "line_text",
    "parse_any_ts",
    "receipt_problem",
    "record_digest",
    "record_mac",
]


# --- the chain over its store ----------------------------------------------------------------


_shared_lock = threading.Lock()
_shared: dict[tuple[str, ...], AuditChain] = {}


# What an append without a host view holds instead of its witness.
_NOTHING = contextlib.nullcontext()

# An append's refusal of a receipt its record line would nest too deep for verify chain.
_TOO_DEEP = f"refusing to append: the receipt nests deeper than {MAX_NESTING - 1} levels"


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
        # The last record this object wrote: a head equal to it needs no check (its own
        # MAC, under the same key, or signature over those very bytes), nor its body or
        # digest computed again.
        self._written: _Written | None = None
        self.host_key_file = None if host_key_file is None else Path(host_key_file)
        self.host_keys_file = None if host_keys_file is None else Path(host_keys_file)
        self._host_key: FileCache[HostKey] = FileCache(record_signature.load_host_key)
        self._host_keys: FileCache[HostKeys] = FileCache(record_signature.load_host_keys)
        self.views = views
        # (chain_id, HMAC key) already checked against the chain's key_check
        self._key_checked: tuple[str | None, bytes] | None = None
        # The HMAC key's pads, hashed once (hmac.digest sets OpenSSL's HMAC up per call).
        self._keyed: tuple[bytes, HmacSha256] | None = None
        # The root of the last tree this object appended to, with the edge hashes it was
        # hashed from: the next append (run ahead) checks the tree it extends against the
        # host's witness by that root, from the same hashes when no one else appended.
        self._last_root: tuple[tuple[bytes, ...], bytes] | None = None

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
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        clock: Callable[[], str] | None = None,
        url_source: str = CHAIN_URL_ENV,
    ) -> AuditChain:
        """The chain the environment selects (``FLOORGUARD_CHAIN_URL``, else the SQLite file
        in ``FLOORGUARD_HOME``) with the key ``FLOORGUARD_CHAIN_KEY_FILE`` names, this
        host's signing key ``FLOORGUARD_HOST_KEY_FILE``, the host-keys document
        ``FLOORGUARD_HOST_KEYS`` and this host's memory of the chain (``chain_view``);
        ``url_source`` names where the chain URL came from when it does not parse. Raises
        ChainError for an unusable ``FLOORGUARD_CHAIN_TIMEOUT``."""
        from floorguard.chainstore import store_from_env, timeout_from_env

        env = os.environ if environ is None else environ
        paths = state_paths(env)
        store = store_from_env(env, url_source=url_source)
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
            if self.views is not None:
                self.views.close()

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
        with self._lock:
            # Read before the store's lock is taken: a bad key refuses without waiting.
            signer = self._signer()
            host_keys = self._listed_hosts()
            witness = None
            if self.views is not None:
                witness = AppendWitness(self.views, self.location, deadline=deadline)
            with _NOTHING if witness is None else witness:
                try:
                    row, root, written = self.store.write(
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
                except BaseException as exc:
                    self._chain_id = None  # re-read it with the next connection
                    cut_hidden_context(exc)
                    raise
                self._written = written
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
        except RecursionError:
            raise ChainWriteError(_TOO_DEEP) from None
        if len(receipt_json.encode("utf-8")) > MAX_RECEIPT_BYTES:
            raise ChainWriteError(
                f"refusing to append: the receipt exceeds {MAX_RECEIPT_BYTES} bytes"
            )
        # Its record line nests one level more, and verify chain refuses a line deeper than
        # MAX_NESTING: what no verifier would take is never written.
        if nests_deeper_than(receipt_json, MAX_NESTING - 1):
            raise ChainWriteError(_TOO_DEEP)
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
    ) -> tuple[_Row, bytes, _Written]:
        """Write the next record and its tree nodes in ``view``'s transaction; the record,
        the new tree's root and what the next append may know of the record. With
        ``witness``, the store's tree is checked against what this host has seen first."""
        head = view.head()
        # A clock given explicitly (tests) wins; else the store's shared one, else ours.
        ts = self._clock() if self._clock is not None else (view.clock() or now_ts())
        key: bytes | None = None
        nodes: dict[tuple[int, int], bytes] = {}

        def stored(level: int, index: int) -> bytes:
            found = nodes.get((level, index))
            if found is None:
                found = view.subtree(level, index)
                if found is None or not _is_hash(found):
                    raise ChainWriteError(f"the Merkle tree lacks subtree ({level}, {index})")
                nodes[(level, index)] = found
            return found

        def refused() -> dict[str, Any]:
            return {"event": event, "receipt_id": receipt_id, "receipt": json.loads(receipt_json)}

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
            if self._chain_id != chain_id or view.rereads_meta:
                # (first append, another database put in place under this process, or a
                # local file, where the read costs nothing: its own metadata decides)
                self._chain_id = view.meta("chain_id")
            if self._chain_id != chain_id:
                raise self._metadata_altered(chain_id, head[0] + 1, stored, witness, refused)
            if key is not None:
                # The chain's check value says whether this host's HMAC key is the fleet's
                # (once per key and chain): a host with another key must not write, and a
                # head that does not verify is no refusal on a shared chain (_check_head).
                self._check_key_against_meta(view, key)
            own = self._written
            if own is not None and own.is_head(head, key, signer):
                prev = own.digest  # this object's record, as it wrote it: checked then
            else:
                head_body = _row_body(head).encode("utf-8")
                self._check_head(head, head_body, key, signer, host_keys)
                prev = record_digest(head_body)
            seq = head[0] + 1
            # The wall clock may step back; the chain's time may not.
            ts = max(ts, head[1])
        row: _Row = (seq, ts, chain_id, event, receipt_id, receipt_json, prev, "")
        body = _row_body(row).encode("utf-8")
        mac = signer.sign(body) if signer is not None else self._mac(_known(key), body)
        row = (*row[:7], mac)
        view.insert_record(row)
        try:
            if seq > 0 and view.subtree(0, seq - 1) is None:
                _build_tree(view, seq)  # a chain from before the tree: built once, here
            # The right edge of the tree before this record: the nodes its leaf is hashed
            # with, and with them the new root (ahead: the store's kept nodes, in one call).
            if isinstance(view, AheadView):
                edge = merkle.CompactRange(seq, view.edge(seq))
            else:
                edge = merkle.CompactRange.of(seq, stored)
            if witness is not None and view.ahead:
                # Ahead, the tree read is this process's own last one: only the one this
                # host remembers will do (another process may have grown it since).
                if not witness.agrees(chain_id, seq, self._root_of(edge)):
                    raise AheadMissed
            elif witness is not None:
                witness.check(chain_id, seq, stored, refused)
            view.insert_nodes(edge.append(merkle.leaf_hash(_row_line(row).encode("utf-8"))))
            root = edge.root()
            self._last_root = (edge.hashes(), root)
            if witness is not None and isinstance(view, AheadView):
                # What the witness will remember, encoded while the server commits.
                view.meanwhile(functools.partial(witness.prepare, chain_id, seq + 1, root))
        except ChainRollbackError:
            raise
        except HostViewError as exc:  # (this host's own files: the database is not to blame)
            raise HostViewError(f"cannot append to the audit chain {self.location}: {exc}") from exc
        except ChainWriteError as exc:
            raise ChainWriteError(
                f"cannot append to the audit chain {self.location}: {exc} "
                "(the database was altered)"
            ) from exc
        authenticator: bytes | str = _known(key) if signer is None else signer.key_id
        return row, root, _Written(row, record_digest(body), authenticator)

    def _root_of(self, edge: merkle.CompactRange) -> bytes:
        """``edge.root()``, taken from the last append's when the edge's hashes are the ones
        it was hashed from (a root depends on nothing else)."""
        last = self._last_root
        if last is not None and last[0] == edge.hashes():
            return last[1]
        return edge.root()

    def _metadata_altered(
        self,
        chain_id: str,
        size: int,
        stored: merkle.Subtree,
        witness: AppendWitness | None,
        refused: Callable[[], Mapping[str, Any]],
    ) -> ChainWriteError:
        """The refusal of a chain whose stored id is not its records' ``chain_id``. With a
        witness, the records are judged first: records of another chain than the one this
        host saw there (or a rollback or fork of it) are refused as such, and recorded."""
        if witness is not None:
            try:
                witness.check(chain_id, size, stored, refused)
            except ChainRollbackError:
                raise
            except ChainWriteError:
                pass  # a tree that does not hold together: altered, as said below
        return ChainWriteError(
            f"cannot append to the audit chain {self.location}: its metadata does not "
            "name the chain its records belong to (the database was altered)"
        )

    def _mac(self, key: bytes, body: bytes) -> str:
        """``record_mac(key, body)``, with the key's pads kept while the key is the same."""
        if self._keyed is None or not hmac.compare_digest(self._keyed[0], key):
            self._keyed = (key, HmacSha256(key))
        return self._keyed[1].hexdigest(body)

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
        when it is this host's, else, on a shared chain, by its form only: without the
        fleet's public keys a host cannot check another host's signature, and the auditor
        (``verify chain --host-keys``) does. On a local chain, which no other host writes,
        another key's signature is refused. The record this object last wrote needs no
        check while it is the head unchanged. A head whose mac has neither form is refused.

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
        if host_keys is not None:
            name, problem = host_keys.check(mac, head_body)
            if problem is not None:
                self._unverified_head(head, f"{where}: {problem}")
            elif self.store.creates_key and signer is not None:
                # No other host writes a local chain: only a key listed under this host's
                # own name (its old key, after a replacement) may have signed its head.
                mine = host_keys.names.get(signer.key_id)
                if name != mine:
                    self._unverified_head(
                        head,
                        f"{where} is signed by host {name}'s key, and this host is "
                        f"{mine or 'not listed'} in {host_keys.source}: no other host writes "
                        "a local chain",
                    )
        elif signer is not None and kid == signer.key_id:
            if not signer.verifies(mac, head_body):
                self._unverified_head(
                    head,
                    f"{where} does not verify with this host's key {signer.path}, which "
                    "signed it (the record was altered, or forged under this host's key id)",
                )
        elif self.store.creates_key:
            # No other host writes a local chain: a head signed by another key is no write
            # of this host's, and its form alone says nothing.
            mine = f"this host's key {signer.path}" if signer is not None else "an HMAC key"
            self._unverified_head(
                head,
                f"{where} is signed by key id {kid}, and this host signs with {mine}: no "
                "other host writes a local chain (after replacing this host's key, list its "
                "old and new public keys under one name in FLOORGUARD_HOST_KEYS)",
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

    def tree_snapshot(self, first: FirstReads | None = None) -> TreeSnapshot:
        """A read of the records and their tree from one snapshot (a context manager);
        ``first``: what it will read first (a hint, see FirstReads)."""
        return TreeSnapshot(self.store, first)

    def records_and_time(self) -> tuple[int, str]:
        """How many records the chain holds, and a time no record appended after them can be
        stamped before, read together under the chain's write lock: the time a checkpoint
        of those records may state. (A snapshot read without the lock can miss a record
        stamped earlier and committed later.) The chain's clock is the store's shared one,
        less how old a stamp the store takes (``stamp_slack_seconds``), but never later than
        this host's less the same, else this host's; and never before the head's stamp. It
        assumes that clock does not step back. Raises ChainWriteError (a chain this process
        cannot lock: a read-only file or role)."""
        from datetime import timedelta

        from floorguard._base._time import parse_ts

        slack = timedelta(seconds=self.store.stamp_slack_seconds)

        def read(view: WriteView) -> tuple[int, str]:
            head = view.head()
            shared = view.clock()
            now = now_ts()
            if shared is not None:
                # Never a time this host's clock has not reached: a server (or its owner)
                # reporting a clock ahead would have it sign a window still open, whose
                # records honest hosts go on to stamp inside it.
                now = min(format_ts(parse_ts(shared) - slack), format_ts(parse_ts(now) - slack))
            if head is None:
                return 0, now
            return head[0] + 1, max(now, head[1])  # (fixed-width stamps: compared as text)

        with self._lock:
            return self.store.write(read, "read the time of")

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


class _Written:
    """The last record an AuditChain object appended: the row as it wrote it, its digest
    (the next record's prev) and what authenticated it (the HMAC key, or the signing key's
    id). A head equal to the row, authenticated by what authenticates appends now, is that
    record, whose MAC or signature this object made: it needs no check."""

    __slots__ = ("authenticator", "digest", "row")

    def __init__(self, row: _Row, digest: str, authenticator: bytes | str) -> None:
        self.row = row
        self.digest = digest
        self.authenticator = authenticator

    def is_head(self, head: _Row, key: bytes | None, signer: HostKey | None) -> bool:
        now: bytes | str | None = key if signer is None else signer.key_id
        if now is None or head != self.row:
            return False
        if isinstance(now, bytes) and isinstance(self.authenticator, bytes):
            return hmac.compare_digest(now, self.authenticator)
        return now == self.authenticator


def _known(key: bytes | None) -> bytes:
    if key is None:  # pragma: no cover - an append loads its key or its signer first
        raise KeyFileError("no key to authenticate the record with")
    return key


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
