"""Canonical bytes (RFC 8785) and digests: what gets hashed, MACed and signed."""

from __future__ import annotations

import hashlib
from typing import Any

ZERO_DIGEST = "sha256:" + "0" * 64


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON value.

    Raises ``floorguard.errors.CanonicalizationError`` for values JSON cannot carry
    (floats that are not finite, integers beyond IEEE 754 precision, non-string keys).
    """
    # Imported here so that `import floorguard` stays cheap.
    import rfc8785

    from floorguard.errors import CanonicalizationError

    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise CanonicalizationError(f"value cannot be canonicalised: {exc}") from exc


def sha256_digest(data: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def content_address(value: Any) -> str:
    """The content address of a JSON value: the digest of its canonical bytes."""
    return sha256_digest(canonical_bytes(value))


def is_digest(text: object) -> bool:
    """True for a well-formed ``sha256:<64 lowercase hex>`` string."""
    if not isinstance(text, str) or len(text) != 71 or not text.startswith("sha256:"):
        return False
    return all(c in "0123456789abcdef" for c in text[7:])
