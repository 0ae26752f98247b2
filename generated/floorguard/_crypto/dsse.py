"""DSSE envelopes (Dead Simple Signing Envelope, v1) with Ed25519 signatures.

The signature covers PAE(payloadType, payload), never the JSON around it, so the payload
type is authenticated and re-encoding the envelope cannot change what was signed.
``cryptography`` is imported only inside the functions that need it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from floorguard.errors import VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
MAX_ENVELOPE_BYTES = 64 * 1024 * 1024
VERIFY_EXTRA = "floorguard[verify]"
_PEM_BOUNDARY = re.compile(rb"-----(BEGIN|END) [^\r\n]*?-----")


def require_cryptography(purpose: str) -> None:
    """Check that signatures can be checked at all: ``cryptography`` is the ``verify`` extra.

    Raises VerificationError naming the extra to install when it is missing, so a host
    that configured signed input learns what to do instead of reading an import error.
    """
    try:
        import cryptography  # noqa: F401
    except ImportError as exc:
        raise VerificationError(
            f"{purpose} needs signature checks, but the cryptography package is not "
            f"installed: install {VERIFY_EXTRA} (pip install '{VERIFY_EXTRA}')"
        ) from exc


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: lengths are byte counts in ASCII decimal."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


@dataclass(frozen=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "payloadType": self.payload_type,
            "signatures": [
                {"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode("ascii")}
                for s in self.signatures
            ],
        }

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n").encode("ascii")


def key_id(public_key: Ed25519PublicKey) -> str:
    """A stable hint naming a key: sha256 of its raw 32 bytes, in hex.

    DSSE does not authenticate keyids; verification never trusts them to pick a key alone.
    """
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def sign(payload_type: str, payload: bytes, private_key: Ed25519PrivateKey) -> Envelope:
    signature = private_key.sign(pae(payload_type, payload))
    return Envelope(
        payload_type, payload, (Signature(key_id(private_key.public_key()), signature),)
    )


def _b64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise VerificationError(f"envelope {what} is not a base64 string")
    try:
        # validate=True refuses characters outside the alphabet instead of skipping them.
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VerificationError(f"envelope {what} is not valid base64") from exc


def parse_envelope(data: bytes) -> Envelope:
    """Parse a DSSE envelope. Raises VerificationError for anything malformed."""
    if len(data) > MAX_ENVELOPE_BYTES:
        raise VerificationError("envelope is larger than 64 MiB")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise VerificationError(f"envelope is not JSON: {exc}") from exc
    if not isinstance(document, Mapping):
        raise VerificationError("envelope is not a JSON object")
    unknown = set(document) - {"payload", "payloadType", "signatures"}
    if unknown:
        raise VerificationError(f"envelope has unknown fields: {', '.join(sorted(unknown))}")
    payload_type = document.get("payloadType")
    if "payloadType" not in document:
        raise VerificationError("envelope payloadType is missing")
    if not isinstance(payload_type, str) or not payload_type:
        raise VerificationError(
            f"envelope payloadType must be a non-empty string, not {json.dumps(payload_type)}"
        )
    raw_signatures = document.get("signatures")
    if not isinstance(raw_signatures, list) or not raw_signatures:
        raise VerificationError("envelope has no signatures")
    signatures = []
    for entry in raw_signatures:
        if not isinstance(entry, Mapping):
            raise VerificationError("envelope signature is not an object")
        keyid = entry.get("keyid", "")
        if not isinstance(keyid, str):
            raise VerificationError("envelope signature keyid is not a string")
        signatures.append(Signature(keyid, _b64(entry.get("sig"), "signature")))
    return Envelope(payload_type, _b64(document.get("payload"), "payload"), tuple(signatures))


def require_one_pem_key(data: bytes, source: str) -> None:
    """Check that ``data`` holds one PEM block and nothing around it but white space.

    PEM loading reads the first block and ignores whatever follows, so a key input holding
    text after its key, or a second key, would be taken for its first key alone. Every key
    read from user input (public and private) is checked here first. Data without any PEM
    boundary passes, for the key loader to refuse in its own words. Raises
    VerificationError naming ``source`` and what else it holds.
    """
    boundaries = list(_PEM_BOUNDARY.finditer(data))
    if not boundaries:
        return
    if sum(found.group(1) == b"BEGIN" for found in boundaries) > 1:
        raise VerificationError(
            f"{source}: holds more than one key (PEM block): it must hold exactly one"
        )
    if data[: boundaries[0].start()].strip():
        raise VerificationError(
            f"{source}: holds text before its key: it must hold the PEM key alone"
        )
    end = next((found for found in boundaries if found.group(1) == b"END"), None)
    if end is not None and data[end.end() :].strip():
        raise VerificationError(
            f"{source}: holds text after its key: it must hold the PEM key alone"
        )


def load_public_key(pem: bytes, source: str = "public key") -> Ed25519PublicKey:
    """Load an Ed25519 public key (PEM SubjectPublicKeyInfo), the one key ``pem`` holds:
    every public key read from user input comes through here. Raises VerificationError
    for anything else (more than one key, text around it: ``require_one_pem_key``)."""
    require_cryptography(source)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    require_one_pem_key(pem, source)
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise VerificationError(f"{source}: not a PEM public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise VerificationError(f"{source}: not an Ed25519 public key")
    return key


def verify(
    envelope: Envelope,
    trusted: Iterable[Ed25519PublicKey],
    *,
    payload_type: str,
    threshold: int = 1,
) -> frozenset[str]:
    """Check that at least ``threshold`` distinct trusted keys signed the envelope.

    Returns the key ids that verified. Each trusted key counts once however many signatures
    it made, so a repeated signature cannot pad the threshold. Raises VerificationError.
    """
    from cryptography.exceptions import InvalidSignature

    if threshold < 1:
        raise VerificationError("a signature threshold below 1 would accept anything")
    if envelope.payload_type != payload_type:
        raise VerificationError(
            f"payloadType is {envelope.payload_type!r}, expected {payload_type!r}"
        )
    message = pae(envelope.payload_type, envelope.payload)
    verified: set[str] = set()
    for key in trusted:
        kid = key_id(key)
        if kid in verified:
            continue
        for signature in envelope.signatures:
            try:
                key.verify(signature.sig, message)
            except InvalidSignature:
                continue
            verified.add(kid)
            break
    if len(verified) < threshold:
        if not verified:
            raise VerificationError("no signature verifies against a trusted key")
        raise VerificationError(
            f"only {len(verified)} of the required {threshold} trusted keys signed"
        )
    return frozenset(verified)
