"""Trusted keys and detached signatures over exact bytes: shared by the runtime and floorctl.

A trusted-keys document is one PEM public key (threshold 1) or the JSON
``{"threshold": N, "keys": ["<PEM>", ...]}``. Signatures count once per distinct key, a key
listed twice is refused (it would make a threshold look reachable with fewer keys), and a
threshold above the number of keys is refused (nothing could ever verify).
``cryptography`` is imported only inside the functions that check signatures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from floorguard._crypto import dsse
from floorguard.errors import VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

MAX_TRUSTED_KEYS_BYTES = 1024 * 1024
MAX_KEYS = 256


@dataclass(frozen=True)
class TrustedKeys:
    """Public keys and how many of them (distinct) must sign."""

    threshold: int
    keys: tuple[Ed25519PublicKey, ...]
    source: str

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(dsse.key_id(key) for key in self.keys)


def parse_trusted_keys(data: bytes, source: str) -> TrustedKeys:
    """Read a trusted-keys document. Raises VerificationError saying what is wrong."""
    if len(data) > MAX_TRUSTED_KEYS_BYTES:
        raise VerificationError(f"{source}: trusted-keys file is larger than 1 MiB")
    if data.lstrip().startswith(b"-----BEGIN"):
        return TrustedKeys(1, (dsse.load_public_key(data, source),), source)

    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            raise VerificationError(f"{source}: duplicate key in the trusted-keys document")
        return dict(pairs)

    try:
        document = json.loads(data.decode("utf-8"), object_pairs_hook=refuse_duplicates)
    except (ValueError, RecursionError) as exc:
        raise VerificationError(
            f"{source}: neither a PEM public key nor a trusted-keys JSON document"
        ) from exc
    if not isinstance(document, dict) or set(document) != {"threshold", "keys"}:
        raise VerificationError(
            f'{source}: a trusted-keys document is exactly {{"threshold": N, "keys": [PEM, ...]}}'
        )
    threshold, pems = document["threshold"], document["keys"]
    if type(threshold) is not int or threshold < 1:
        raise VerificationError(f"{source}: threshold must be an integer of at least 1")
    if not isinstance(pems, list) or not all(isinstance(pem, str) for pem in pems):
        raise VerificationError(f"{source}: keys must be a list of PEM strings")
    if len(pems) > MAX_KEYS:
        raise VerificationError(f"{source}: more than {MAX_KEYS} keys")
    keys = []
    seen: set[str] = set()
    for index, pem in enumerate(pems):
        key = dsse.load_public_key(pem.encode("utf-8"), f"{source}: keys[{index}]")
        kid = dsse.key_id(key)
        if kid in seen:
            raise VerificationError(
                f"{source}: keys[{index}] is listed twice; each key counts once toward the "
                "threshold"
            )
        seen.add(kid)
        keys.append(key)
    if not keys:
        raise VerificationError(f"{source}: trusts no key, so nothing signed can be accepted")
    if threshold > len(keys):
        raise VerificationError(
            f"{source}: threshold {threshold} is more than the {len(keys)} keys listed"
        )
    return TrustedKeys(threshold, tuple(keys), source)


def verify_detached(
    data: bytes, envelope_bytes: bytes, trusted: TrustedKeys, *, payload_type: str
) -> frozenset[str]:
    """Check that ``envelope_bytes`` signs exactly ``data`` with a threshold of ``trusted``.

    Returns the key ids that verified. Raises VerificationError: malformed envelope, wrong
    payload type, a signature over other bytes (stale or mixed), too few distinct trusted keys.
    """
    envelope = dsse.parse_envelope(envelope_bytes)
    if envelope.payload_type != payload_type:
        raise VerificationError(
            f"signature payloadType is {envelope.payload_type!r}, expected {payload_type!r}"
        )
    if envelope.payload != data:
        # The signed bytes are not the bytes in hand: a stale signature of an older
        # version, or a signature lifted from another file (mix-and-match).
        raise VerificationError(
            "the signature covers different bytes than the file (stale or mismatched signature)"
        )
    try:
        return dsse.verify(
            envelope, trusted.keys, payload_type=payload_type, threshold=trusted.threshold
        )
    except VerificationError as exc:
        raise VerificationError(f"{exc} (trusted keys: {trusted.source})") from exc
