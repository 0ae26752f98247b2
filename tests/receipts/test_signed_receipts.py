"""Signed floor-update receipts: any tampering with any part fails verification."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from floorguard._base._canonical import canonical_bytes
from floorguard._chain import receipts
from floorguard._crypto import dsse
from floorguard._maps.map_model import entries_hash
from floorguard.errors import VerificationError

OLD = {"aider": {"min_safe_version": "0.50.0", "advisory_id": "BSA-0001", "note": "old"}}
NEW = {"aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "new"}}


def update_receipt() -> dict[str, Any]:
    return receipts.new_receipt(
        receipts.FLOOR_UPDATE,
        {
            "old_floor_map_hash": entries_hash(OLD),
            "new_floor_map_hash": entries_hash(NEW),
            "old_map_version": 1,
            "new_map_version": 2,
            "new_floor_map": NEW,
            "diff": {"added": [], "removed": [], "changed": []},
            "downgrade": False,
            "downgrade_allowed": False,
            "conflicts": [],
            "feeds": [{"source": "f.json", "digest": "sha256:" + "1" * 64, "schema_version": 1}],
            "changed": True,
            "forced": False,
            "template": "floorguard",
        },
        ts="2026-11-30T00:00:00.000000Z",
    )


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def signed(key: Ed25519PrivateKey) -> bytes:
    return receipts.sign_update_receipt(update_receipt(), key).to_bytes()


def resign_statement(envelope: bytes, mutate: Any, key: Ed25519PrivateKey) -> bytes:
    """Change the statement and sign it again with ``key`` (an attacker with a key)."""
    document = json.loads(envelope)
    statement = json.loads(base64.b64decode(document["payload"]))
    mutate(statement)
    return dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, canonical_bytes(statement), key).to_bytes()


def test_signed_update_receipt_verifies(key: Ed25519PrivateKey) -> None:
    verified = receipts.verify_update_envelope(signed(key), [key.public_key()])
    assert verified.receipt == update_receipt()
    assert verified.receipt_id == receipts.receipt_id(update_receipt())
    assert verified.receipt["new_floor_map_hash"] == entries_hash(NEW)


def test_statement_subject_names_the_new_map(key: Ed25519PrivateKey) -> None:
    payload = json.loads(base64.b64decode(json.loads(signed(key))["payload"]))
    assert payload["_type"] == "https://in-toto.io/Statement/v1"
    assert payload["subject"][0]["digest"]["sha256"] == entries_hash(NEW).removeprefix("sha256:")


@pytest.mark.parametrize(
    "field, value",
    [
        ("old_floor_map_hash", "sha256:" + "0" * 64),
        ("new_map_version", 9),
        ("downgrade_allowed", True),
        ("ts", "2030-01-01T00:00:00Z"),
        ("feeds", []),
    ],
)
def test_refuses_a_receipt_with_a_changed_field(
    key: Ed25519PrivateKey, field: str, value: object
) -> None:
    document = json.loads(signed(key))
    statement = json.loads(base64.b64decode(document["payload"]))
    statement["predicate"][field] = value
    document["payload"] = base64.b64encode(canonical_bytes(statement)).decode()
    with pytest.raises(VerificationError, match="no signature verifies"):
        receipts.verify_update_envelope(json.dumps(document).encode(), [key.public_key()])


def test_refuses_a_receipt_with_a_changed_signature(key: Ed25519PrivateKey) -> None:
    document = json.loads(signed(key))
    sig = bytearray(base64.b64decode(document["signatures"][0]["sig"]))
    sig[0] ^= 1
    document["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    with pytest.raises(VerificationError):
        receipts.verify_update_envelope(json.dumps(document).encode(), [key.public_key()])


def test_refuses_a_receipt_with_a_changed_payload_type(key: Ed25519PrivateKey) -> None:
    document = json.loads(signed(key))
    document["payloadType"] = "application/json"
    with pytest.raises(VerificationError, match="payloadType"):
        receipts.verify_update_envelope(json.dumps(document).encode(), [key.public_key()])


def test_refuses_a_receipt_signed_by_another_key(key: Ed25519PrivateKey) -> None:
    with pytest.raises(VerificationError):
        receipts.verify_update_envelope(signed(Ed25519PrivateKey.generate()), [key.public_key()])


def test_refuses_a_receipt_whose_map_does_not_match_its_hash(key: Ed25519PrivateKey) -> None:
    def swap_map(statement: dict[str, Any]) -> None:
        statement["predicate"]["new_floor_map"]["aider"]["min_safe_version"] = "0.1.0"

    with pytest.raises(VerificationError, match="hashing to"):
        receipts.verify_update_envelope(
            resign_statement(signed(key), swap_map, key), [key.public_key()]
        )


def test_refuses_a_statement_whose_subject_is_another_map(key: Ed25519PrivateKey) -> None:
    def retarget(statement: dict[str, Any]) -> None:
        statement["subject"][0]["digest"]["sha256"] = "f" * 64

    with pytest.raises(VerificationError, match="subject"):
        receipts.verify_update_envelope(
            resign_statement(signed(key), retarget, key), [key.public_key()]
        )


def test_refuses_a_foreign_predicate_type(key: Ed25519PrivateKey) -> None:
    def foreign(statement: dict[str, Any]) -> None:
        statement["predicateType"] = "https://slsa.dev/provenance/v1"

    with pytest.raises(VerificationError, match="predicateType"):
        receipts.verify_update_envelope(
            resign_statement(signed(key), foreign, key), [key.public_key()]
        )


def test_chain_style_receipt_is_checked_by_content_address() -> None:
    receipt = update_receipt()
    good = json.dumps({"receipt_id": receipts.receipt_id(receipt), "receipt": receipt}).encode()
    checked = receipts.check_receipt_document(good, None, content_only=True)
    assert checked.pinned_map_hash == entries_hash(NEW)
    assert not checked.signed
    receipt["new_map_version"] = 3
    bad = json.dumps({"receipt_id": receipts.receipt_id(update_receipt()), "receipt": receipt})
    with pytest.raises(VerificationError, match="content address mismatch"):
        receipts.check_receipt_document(bad.encode(), None, content_only=True)


def test_refuses_an_unsigned_receipt_unless_content_only_is_asked_for() -> None:
    receipt = update_receipt()
    good = json.dumps({"receipt_id": receipts.receipt_id(receipt), "receipt": receipt}).encode()
    with pytest.raises(VerificationError, match="unsigned: only its content address was checked"):
        receipts.check_receipt_document(good, [Ed25519PrivateKey.generate().public_key()])


def test_receipt_fields_cannot_override_kind_or_time() -> None:
    with pytest.raises(VerificationError, match="override"):
        receipts.new_receipt(receipts.CANARY, {"kind": receipts.SPAWN_PREFLIGHT})


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b"[1]", "neither a DSSE envelope"),
        (b"not json", "not JSON"),
        (b'{"receipt": {"kind": "adapter.other"}}', "unknown receipt kind"),
        (b'{"payloadType": "x", "payload": "", "signatures": []}', "needs a public key"),
    ],
    ids=["not-an-object", "not-json", "unknown-kind", "envelope-without-key"],
)
def test_refuses_receipt_documents_that_cannot_be_checked(document: bytes, message: str) -> None:
    with pytest.raises(VerificationError, match=message):
        receipts.check_receipt_document(document, None)


def test_a_receipt_that_pins_no_map_is_refused() -> None:
    receipt = receipts.new_receipt(receipts.CANARY, {"adapter": "aider"})
    document = json.dumps({"receipt_id": receipts.receipt_id(receipt), "receipt": receipt})
    with pytest.raises(VerificationError, match="pins no floor-map hash"):
        receipts.check_receipt_document(document.encode(), None, content_only=True)
