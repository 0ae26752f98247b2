"""A chain record's format: its fields and events, its canonical body and export line
(written fast, also straight from stored rows), its digest and MAC, and the checks a receipt
passes before it is recorded.

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
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring
from typing import Any

from floorguard._base._canonical import ZERO_DIGEST, canonical_bytes, plain_json_text
from floorguard._base._time import is_chain_ts, parse_ts
from floorguard._chain import record_signature
from floorguard.chainstore.interface import Row
from floorguard.errors import CanonicalizationError, ChainError, FloorguardError

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
    return isinstance(text, str) and len(text) == 32 and not text.strip(record_signature.HEX_DIGITS)


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
    if is_chain_ts(stamp):
        return None  # the form the gate writes, checked without a datetime
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

_new_object = object.__new__


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

    @classmethod
    def from_values(
        cls, values: tuple[int, str, str, str, str, dict[str, Any], str, str]
    ) -> ChainRecord:
        """The record of ``values`` in ``RECORD_FIELDS`` order, as ``ChainRecord(*values)``
        makes it but at a quarter of the cost (the frozen ``__init__`` sets each field
        through ``object.__setattr__``): a verifier makes one for every record it reads."""
        record = _new_object(cls)
        record.__dict__.update(zip(RECORD_FIELDS, values, strict=True))
        return record

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


def _row_body_and_line(row: _Row) -> tuple[str, str]:
    """``_row_body(row)`` and ``_row_line(row)``, each field escaped once for both (building
    a tree reads every record for both)."""
    seq, ts, chain_id, event, receipt_id, receipt_json, prev, mac = row
    head = f'{{"chain_id":{_jstr(chain_id)},"event":{_jstr(event)},'
    tail = (
        f'"prev":{_jstr(prev)},"receipt":{receipt_json},"receipt_id":{_jstr(receipt_id)},'
        f'"seq":{seq},"ts":{_jstr(ts)}}}'
    )
    return head + tail, f'{head}"mac":{_jstr(mac)},{tail}'


def _row_body(row: _Row) -> str:
    # (the columns named one by one: a dict of them, unpacked, cost as much as the text)
    seq, ts, chain_id, event, receipt_id, receipt_json, prev, _ = row
    return body_text(seq=seq, ts=ts, chain_id=chain_id, event=event, receipt_id=receipt_id,
                     receipt_json=receipt_json, prev=prev)  # fmt: skip


def _row_line(row: _Row) -> str:
    seq, ts, chain_id, event, receipt_id, receipt_json, prev, mac = row
    return line_text(seq=seq, ts=ts, chain_id=chain_id, event=event, receipt_id=receipt_id,
                     receipt_json=receipt_json, prev=prev, mac=mac)  # fmt: skip


def _row_record(row: _Row) -> ChainRecord:
    seq, ts, chain_id, event, receipt_id, receipt_json, prev, mac = row
    try:
        receipt = json.loads(receipt_json)
    except ValueError as exc:
        raise ChainError(f"record {seq} holds a receipt that is not JSON") from exc
    return ChainRecord(seq, ts, chain_id, event, receipt_id, receipt, prev, mac)
