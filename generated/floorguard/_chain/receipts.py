"""Receipts: JSON objects sealed by their content address, and the signed floor-update receipt.

Every receipt has ``kind``, ``schema_version`` and ``ts``. Its ``receipt_id`` is the digest
of its RFC 8785 bytes, so any change to any field changes the id. A floor-update receipt
travels as a DSSE envelope around an in-toto Statement v1 whose subject is the new map.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from floorguard._base import _time
from floorguard._base._canonical import canonical_bytes, content_address, is_digest
from floorguard._chain.chain_record import receipt_problem
from floorguard._crypto import dsse
from floorguard._maps.map_model import entries_hash
from floorguard.errors import FloorguardError, FloorMapError, VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

RECEIPT_SCHEMA_VERSION = 1
FLOOR_UPDATE = "adapter.floor_update_receipt"
SPAWN_PREFLIGHT = "adapter.spawn_preflight_receipt"
VERSION_POSTURE = "adapter.version_posture"
CANARY = "adapter.canary_receipt"
KINDS = frozenset({FLOOR_UPDATE, SPAWN_PREFLIGHT, VERSION_POSTURE, CANARY})

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
FLOOR_UPDATE_PREDICATE_TYPE = "urn:floorguard:predicate:adapter.floor_update_receipt:v1"

UPDATE_FIELDS = frozenset(
    {
        "kind", "schema_version", "ts", "old_floor_map_hash", "new_floor_map_hash",
        "old_map_version", "new_map_version", "new_floor_map", "diff", "feeds",
        "downgrade_allowed", "changed", "template", "forced",
    }
)  # fmt: skip
# A map too large for one chain record is named by its hash only (archived in ``maps/``
# beside the module, as canonical JSON under that hash); its diff and conflicts by their
# content addresses. Such a receipt has these fields instead of the embedded ones.
EMBEDDED_FIELDS = frozenset({"new_floor_map", "diff"})
BY_REFERENCE_FIELDS = frozenset({"new_floor_map_adapters", "diff_digest", "conflicts_digest"})

NO_TRUSTED_SIGNATURE = "no signature verifies against a trusted key"

# The JSON type of each field the formats fix, by receipt kind, checked wherever the field
# is present (which fields must be present is the kind's own check). Python reads true as 1
# and 1.0 as equal to 1, and RFC 8785 writes 1.0 as 1: neither a content address nor a
# record's MAC tells them apart, so only the type can. A path steps through objects by
# name and through every element of a list by ``*``; containers come before their members.
_LIST, _OBJECT, _STRING = "a list", "an object", "a string"
_INTEGER, _BOOLEAN = "a JSON integer", "a JSON boolean"
_INTEGER_OR_NULL = "a JSON integer or null"
_FIELD_TYPES: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    FLOOR_UPDATE: (
        (("feeds",), _LIST),
        (("feeds", "*"), _OBJECT),
        (("feeds", "*", "schema_version"), _INTEGER),
        (("feeds", "*", "version"), _INTEGER),
        (("waivers",), _OBJECT),
        (("waivers", "schema_version"), _INTEGER),
        (("waivers", "waivers"), _INTEGER),
        (("conflicts",), _LIST),
        (("conflicts_count",), _INTEGER),
        (("diff",), _OBJECT),
        (("diff_counts",), _OBJECT),
        (("diff_counts", "*"), _INTEGER),
        (("downgrade",), _BOOLEAN),
        (("changed",), _BOOLEAN),
        (("forced",), _BOOLEAN),
        (("template",), _STRING),
    ),
    CANARY: ((("certified",), _BOOLEAN),),
    # The MCP servers an agent would start, each judged (or recorded as remote, disabled).
    SPAWN_PREFLIGHT: (
        (("mcp_servers",), _LIST),
        (("mcp_servers", "*"), _OBJECT),
        (("mcp_servers", "*", "name"), _STRING),
        (("mcp_servers", "*", "verdict"), _STRING),
        (("mcp_servers", "*", "declared_in"), _STRING),
        (("mcp_servers", "*", "enabled"), _BOOLEAN),
    ),
    VERSION_POSTURE: (
        (("floor_map_hash",), _STRING),
        (("adapters",), _LIST),
        (("adapters", "*"), _OBJECT),
        (("adapters", "*", "waiver_days_left"), _INTEGER_OR_NULL),
    ),
}
# The fields a kind must hold besides kind, schema_version and ts (their types are checked
# above): doctor's posture is of the map in force and of each adapter.
_REQUIRED_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    VERSION_POSTURE: (("floor_map_hash", _STRING), ("adapters", _LIST)),
}
_IS_TYPE = {
    _LIST: lambda value: type(value) is list,
    _OBJECT: lambda value: type(value) is dict,
    _INTEGER: lambda value: type(value) is int,
    _INTEGER_OR_NULL: lambda value: value is None or type(value) is int,
    _BOOLEAN: lambda value: type(value) is bool,
    _STRING: lambda value: type(value) is str,
}


def shape_problem(kind: str, receipt: object) -> str | None:
    """Why ``receipt`` is not a well-formed receipt of ``kind``, or None.

    The one shape check of every verifier (``verify chain`` on each record, ``verify
    receipt`` signed or not): ``kind``, ``schema_version`` and ``ts``; the JSON type of every
    field its format fixes; and for a floor update, its self-consistency
    (:func:`check_update_receipt`). The message names the field by its JSON path.
    """
    problem = receipt_problem(kind, receipt)
    if problem is not None or not isinstance(receipt, dict):
        return problem
    for name, wanted in _REQUIRED_FIELDS.get(kind, ()):
        if name not in receipt:
            return f"receipt has no {name} ({wanted})"
    for path, wanted in _FIELD_TYPES.get(kind, ()):
        if path[0] not in receipt:
            continue  # (most receipts have few of these fields: no walk for the others)
        for where, value in _members(receipt, path, ""):
            if not _IS_TYPE[wanted](value):
                return f"receipt {where} is not {wanted} ({_shown(value)})"
    if kind == FLOOR_UPDATE:
        try:
            check_update_receipt(receipt)
        except FloorguardError as exc:
            return str(exc)
    return None


def _members(node: Any, path: tuple[str, ...], where: str) -> Iterable[tuple[str, Any]]:
    """(JSON path, value) of each member of ``node`` at ``path``; none where a step does
    not exist or its container has the wrong type (the container's own check says so)."""
    if not path:
        yield where, node
        return
    step, rest = path[0], path[1:]
    if step == "*":
        if type(node) is list:
            for i, item in enumerate(node):
                yield from _members(item, rest, f"{where}[{i}]")
        elif type(node) is dict:
            for name, item in node.items():
                yield from _members(item, rest, f"{where}.{name}")
    elif type(node) is dict and step in node:
        yield from _members(node[step], rest, f"{where}.{step}" if where else step)


def _shown(value: object) -> str:
    """A value as a refusal quotes it: its JSON (cut short), or what kind of container."""
    if type(value) is dict:
        return "an object"
    if type(value) is list:
        return "a list"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


class _NotJson(ValueError):
    """NaN, Infinity or -Infinity: Python's json reads them, JSON has no such values."""


def _refuse_constant(text: str) -> Any:
    raise _NotJson(text)


class _RepeatedKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _RepeatedKey(repr(key))
        found[key] = value
    return found


def parse_document(data: bytes, what: str = "the file") -> Any:
    """A receipt file's (or signed payload's) JSON, read strictly: UTF-8 without a
    byte-order mark (``json.loads`` of bytes would skip one, or read UTF-16), and no NaN or
    Infinity (which RFC 8785 cannot hash). Raises VerificationError saying what was found."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise VerificationError(f"{what} starts with a UTF-8 byte-order mark; write it without one")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VerificationError(f"{what} is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    try:
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except _NotJson as exc:
        raise VerificationError(f"{what} holds {exc}, and {exc} is not JSON") from exc
    except _RepeatedKey as exc:
        # Parsers differ on which copy counts: one reader's payload would be another's.
        raise VerificationError(f"{what} repeats the key {exc} in one object") from exc
    except (ValueError, RecursionError) as exc:
        raise VerificationError(f"{what} is not JSON: {exc}") from exc


def map_by_reference(receipt: Mapping[str, Any]) -> bool:
    """True when an update receipt names its new map by hash instead of carrying it."""
    return "new_floor_map" not in receipt and set(receipt) >= BY_REFERENCE_FIELDS


def new_receipt(kind: str, fields: Mapping[str, Any], *, ts: str | None = None) -> dict[str, Any]:
    """A receipt of ``kind`` carrying ``fields``; the timestamp is now unless given."""
    if kind not in KINDS:
        raise VerificationError(f"unknown receipt kind {kind!r}")
    if "kind" in fields or "schema_version" in fields or "ts" in fields:  # (no set made)
        clash = {"kind", "schema_version", "ts"} & set(fields)
        raise VerificationError(f"receipt fields may not override {', '.join(sorted(clash))}")
    receipt = {"kind": kind, "schema_version": RECEIPT_SCHEMA_VERSION, "ts": ts or _time.now_ts()}
    receipt.update(fields)
    return receipt


def receipt_id(receipt: Mapping[str, Any]) -> str:
    return content_address(receipt)


def update_statement(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The in-toto Statement v1 whose predicate is a floor-update receipt."""
    new_hash = receipt["new_floor_map_hash"]
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": "floor-map", "digest": {"sha256": new_hash.removeprefix("sha256:")}}],
        "predicateType": FLOOR_UPDATE_PREDICATE_TYPE,
        "predicate": dict(receipt),
    }


def sign_update_receipt(receipt: Mapping[str, Any], key: Ed25519PrivateKey) -> dsse.Envelope:
    check_update_receipt(receipt)
    payload = canonical_bytes(update_statement(receipt))
    return dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, payload, key)


def check_update_receipt(receipt: Mapping[str, Any]) -> None:
    """Self-consistency of a floor-update receipt. Raises VerificationError."""
    if receipt.get("kind") != FLOOR_UPDATE:
        raise VerificationError(f"receipt kind is {receipt.get('kind')!r}, not {FLOOR_UPDATE}")
    by_reference = map_by_reference(receipt)
    required = (
        (UPDATE_FIELDS - EMBEDDED_FIELDS) | BY_REFERENCE_FIELDS if by_reference else UPDATE_FIELDS
    )
    missing = required - set(receipt)
    if missing:
        raise VerificationError(f"update receipt lacks {', '.join(sorted(missing))}")
    for field in ("old_floor_map_hash", "new_floor_map_hash"):
        if not is_digest(receipt[field]):
            raise VerificationError(f"update receipt {field} is not a sha256 digest")
    for field in ("old_map_version", "new_map_version"):
        # A JSON integer: true passes isinstance(..., int), and 1.0 hashes like 1 (RFC 8785).
        version = receipt[field]
        if type(version) is not int or version < 0:
            raise VerificationError(
                f"update receipt {field} is not a map version (an integer of at least 0)"
            )
    if by_reference:
        _check_by_reference(receipt)
        return
    try:
        carried = entries_hash(receipt["new_floor_map"])
    except FloorMapError as exc:
        raise VerificationError(f"update receipt new_floor_map is malformed: {exc}") from exc
    if carried != receipt["new_floor_map_hash"]:
        raise VerificationError(
            f"update receipt carries a map hashing to {carried}, "
            f"not its new_floor_map_hash {receipt['new_floor_map_hash']}"
        )
    _check_downgrade_allowed(receipt)


def _check_downgrade_allowed(receipt: Mapping[str, Any]) -> None:
    if not isinstance(receipt["downgrade_allowed"], bool):
        raise VerificationError("update receipt downgrade_allowed is not a boolean")


def _check_by_reference(receipt: Mapping[str, Any]) -> None:
    """The shape of a receipt naming its map by hash; the map itself is checked by whoever
    resolves it (``verify receipt --floor-map``, the window proof's map archives)."""
    for field in ("diff", "conflicts"):
        if field in receipt:
            raise VerificationError(f"update receipt names its map by hash but carries {field}")
    for field in ("diff_digest", "conflicts_digest"):
        if not is_digest(receipt[field]):
            raise VerificationError(f"update receipt {field} is not a sha256 digest")
    count = receipt["new_floor_map_adapters"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise VerificationError("update receipt new_floor_map_adapters is not a count")
    _check_downgrade_allowed(receipt)


@dataclass(frozen=True)
class VerifiedUpdate:
    receipt: dict[str, Any]
    receipt_id: str
    key_ids: frozenset[str]


def open_statement(
    envelope: dsse.Envelope, trusted: Iterable[Ed25519PublicKey], predicate_type: str
) -> tuple[dict[str, Any], frozenset[str]]:
    """The in-toto Statement v1 an envelope signs, once a trusted key's signature over it
    checks, and the ids of the keys that signed. Raises VerificationError: no trusted
    signature, a payload that is not a JSON Statement v1, or another predicate type."""
    key_ids = dsse.verify(envelope, trusted, payload_type=dsse.INTOTO_PAYLOAD_TYPE)
    statement = parse_document(envelope.payload, "the signed payload")
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise VerificationError("signed payload is not an in-toto Statement v1")
    if statement.get("predicateType") != predicate_type:
        raise VerificationError(
            f"predicateType is {statement.get('predicateType')!r}, expected {predicate_type}"
        )
    return statement, key_ids


def verify_update_envelope(data: bytes, trusted: Iterable[Ed25519PublicKey]) -> VerifiedUpdate:
    """Verify a signed floor-update receipt: signature, statement shape, content binding.

    Raises VerificationError naming the first thing that does not hold.
    """
    envelope = dsse.parse_envelope(data)
    # The shape first, as for an unsigned receipt: a receipt of the wrong shape is refused
    # for its shape whoever signed it (the signature is checked next, over the same bytes).
    unverified = parse_document(envelope.payload, "the signed payload")
    if isinstance(unverified, dict) and isinstance(unverified.get("predicate"), dict):
        problem = shape_problem(FLOOR_UPDATE, unverified["predicate"])
        if problem is not None:
            raise VerificationError(problem)
    statement, key_ids = open_statement(envelope, trusted, FLOOR_UPDATE_PREDICATE_TYPE)
    receipt = statement.get("predicate")
    if not isinstance(receipt, dict):
        raise VerificationError("statement predicate is not an object")
    if statement != update_statement(receipt):
        raise VerificationError("statement subject does not name the receipt's new floor map")
    if canonical_bytes(statement) != envelope.payload:
        # We only ever sign canonical bytes; anything else was not produced by floorctl.
        raise VerificationError("signed payload is not in canonical form")
    return VerifiedUpdate(receipt, receipt_id(receipt), key_ids)


def pinned_map_hash(receipt: Mapping[str, Any]) -> str:
    """The floor-map hash a receipt pins: the new map for an update, else the map in force."""
    field = "new_floor_map_hash" if receipt.get("kind") == FLOOR_UPDATE else "floor_map_hash"
    value = receipt.get(field)
    if not isinstance(value, str) or not is_digest(value):
        raise VerificationError(f"receipt pins no floor-map hash (field {field})")
    return value


UNSIGNED = "unsigned: only its content address was checked"


@dataclass(frozen=True)
class CheckedReceipt:
    """A receipt whose content address, and when ``signed`` its signature, verified.

    ``signed`` is True only when a DSSE envelope's signature verified against a trusted key
    and the receipt is that envelope's own payload; ``signed_by`` then names the keys.
    """

    receipt: dict[str, Any]
    receipt_id: str
    signed_by: frozenset[str]
    pinned_map_hash: str

    @property
    def signed(self) -> bool:
        return bool(self.signed_by)


def is_envelope_document(data: bytes) -> bool:
    """Whether ``data`` is a JSON object in DSSE form (it then needs a key to verify)."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(document, dict) and "payloadType" in document


def check_receipt_document(
    data: bytes, trusted: Iterable[Ed25519PublicKey] | None, *, content_only: bool = False
) -> CheckedReceipt:
    """Verify a receipt file: a DSSE update envelope, or ``{"receipt_id", "receipt", ...}``.

    An envelope verifies only by its signature against ``trusted``, whatever
    ``content_only`` says (a signed receipt is never checked less). The second form is a
    chain record (one line of ``chain export``) or any stored receipt: it carries no
    signature (any other member beside ``receipt`` is ignored, never taken for one), so its
    recomputed content address is all that can be checked, and that is accepted only with
    ``content_only``. Raises VerificationError.
    """
    document = parse_document(data)
    if isinstance(document, dict) and "payloadType" in document:
        if trusted is None:
            raise VerificationError("a signed receipt needs a public key to verify against")
        verified = verify_update_envelope(data, trusted)
        if not verified.key_ids:
            raise VerificationError(NO_TRUSTED_SIGNATURE)
        return CheckedReceipt(
            verified.receipt,
            verified.receipt_id,
            verified.key_ids,
            pinned_map_hash(verified.receipt),
        )
    if not isinstance(document, dict) or not isinstance(document.get("receipt"), dict):
        raise VerificationError("neither a DSSE envelope nor an object with a 'receipt'")
    receipt = document["receipt"]
    if receipt.get("kind") not in KINDS:
        raise VerificationError(f"unknown receipt kind {receipt.get('kind')!r}")
    # The shape of its kind, as verify chain checks it (the content address alone cannot
    # tell 1.0 from 1: RFC 8785 writes both as 1).
    problem = shape_problem(receipt["kind"], receipt)
    if problem is not None:
        raise VerificationError(problem)
    try:
        actual = receipt_id(receipt)
    except FloorguardError as exc:  # CanonicalizationError: beyond what JSON can carry
        raise VerificationError(f"the receipt cannot be hashed: {exc}") from exc
    stated = document.get("receipt_id")
    if stated != actual:
        raise VerificationError(
            f"content address mismatch: stated {stated}, the receipt hashes to {actual}"
        )
    pinned = pinned_map_hash(receipt)
    if not content_only:
        raise VerificationError(
            f"{UNSIGNED} (no signature to verify; pass --content-only to accept "
            "the content address alone)"
        )
    return CheckedReceipt(receipt, actual, frozenset(), pinned)


def checked_document(checked: CheckedReceipt, *, floor_map_checked: bool) -> dict[str, Any]:
    """The ``verify receipt --json`` document, the same from both CLIs."""
    return {
        "verified": True,
        "signed": checked.signed,
        "content_only": not checked.signed,
        "receipt_id": checked.receipt_id,
        "kind": checked.receipt["kind"],
        "signed_by": sorted(checked.signed_by),
        "floor_map_hash": checked.pinned_map_hash,
        "floor_map_checked": floor_map_checked,
    }


def checked_headline(checked: CheckedReceipt) -> str:
    """The first line ``verify receipt`` prints; an unsigned receipt says so on it."""
    line = f"OK {checked.receipt['kind']} {checked.receipt_id}"
    if not checked.signed:
        line += f" ({UNSIGNED}, as --content-only asked)"
    return line
