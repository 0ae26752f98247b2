"""Witness cosignatures of checkpoints: C2SP tlog-cosignature, Ed25519 (``cosignature/v1``).

A witness keeps, for each log origin, the size and root of the last checkpoint it cosigned.
It cosigns a newer checkpoint only after checking the log's signature and a consistency
proof from that checkpoint, so it never cosigns a smaller tree or a second root for one
size (a fork: the split view a log could otherwise show to different auditors). A verifier
that requires N witness cosignatures beside the log's signature then trusts a checkpoint
only if N independent parties saw the same append-only log.

Line: ``— <witness name> base64(key id || u64 timestamp, big-endian || Ed25519 signature)``
with key id = SHA-256(name || 0x0A || 0x04 || 32-byte public key)[:4]. Signed message:
``cosignature/v1\\n``, ``time <timestamp>\\n``, then the checkpoint's note text. The witness
is named by its key: a verifier given a public key accepts a line whose name and key id
match that key and whose signature verifies. This module is pure; state files are the
caller's (``floorctl witness``).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from floorguard._crypto import merkle
from floorguard._proofs import checkpoint as checkpoints
from floorguard.errors import VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from floorguard._proofs.checkpoint import Checkpoint
    from floorguard._proofs.tlog import ConsistencyProof

COSIGNATURE_TYPE = b"\x04"
HEADER = "cosignature/v1\n"
MAX_TIMESTAMP = (1 << 63) - 1


def witness_key_id(name: str, public_raw: bytes) -> bytes:
    """SHA-256(name || 0x0A || 0x04 || key)[:4], the tlog-cosignature Ed25519 key id."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + COSIGNATURE_TYPE + public_raw).digest()[:4]


def default_name(public_raw: bytes) -> str:
    """A witness name when none is given: stable for the key, and says what it is."""
    return "floorguard-witness/" + hashlib.sha256(public_raw).hexdigest()[:16]


def signed_message(body: str, timestamp: int) -> bytes:
    """What a cosignature signs: the header, the time line, the checkpoint's note text."""
    return f"{HEADER}time {timestamp}\n{body}".encode()


def cosignature_line(body: str, name: str, key: Ed25519PrivateKey, timestamp: int) -> str:
    """The cosignature line of ``name`` over the note text ``body`` at ``timestamp``."""
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise VerificationError(f"cosignature timestamp {timestamp} is out of range")
    public = checkpoints.raw_public(key.public_key())
    signature = key.sign(signed_message(body, timestamp))
    blob = witness_key_id(name, public) + timestamp.to_bytes(8, "big") + signature
    return f"{checkpoints.EM_DASH} {name} {base64.b64encode(blob).decode('ascii')}\n"


@dataclass(frozen=True)
class WitnessState:
    """The last checkpoint a witness cosigned for one origin."""

    origin: str
    size: int
    root: bytes


def check_cosign(
    last: WitnessState | None,
    old: Checkpoint,
    new: Checkpoint,
    proof: ConsistencyProof,
) -> None:
    """Whether a witness whose last cosigned checkpoint is ``last`` may cosign ``new``,
    given the verified checkpoints ``old`` and ``new`` and a consistency proof between them.

    ``old`` must be the checkpoint it last cosigned (any, the first time). Raises
    VerificationError for a smaller tree, a fork (two roots for one size), or a proof
    that does not verify.
    """
    from floorguard._proofs import tlog

    if old.origin != new.origin:
        raise VerificationError(f"the checkpoints are of two logs ({old.origin}, {new.origin})")
    if last is not None:
        if last.origin != new.origin:
            raise VerificationError(f"the state is of {last.origin}, not {new.origin}")
        if new.size < last.size:
            raise VerificationError(
                f"refusing to cosign a smaller tree: {new.size} records, after {last.size}"
            )
        if new.size == last.size and new.root != last.root:
            raise VerificationError(
                f"refusing to cosign a fork: a second root for size {new.size} of {new.origin}"
            )
        if (old.size, old.root) != (last.size, last.root):
            if old.size == last.size:
                raise VerificationError(
                    f"refusing to cosign a fork: the old checkpoint states another root for "
                    f"size {old.size} than the one this witness cosigned"
                )
            raise VerificationError(
                f"the old checkpoint (size {old.size}) is not the last one this witness "
                f"cosigned for {new.origin} (size {last.size}): give that one as --old"
            )
    try:
        tlog.check_consistency(proof, old, new)
    except VerificationError as exc:
        raise VerificationError(f"refusing to cosign a fork: {exc}") from exc


def verified_witnesses(data: bytes, body: str, keys: list[Ed25519PublicKey]) -> set[int]:
    """The indexes of ``keys`` with a valid cosignature on the note ``data`` (text ``body``).

    A line whose name and key id match a key must verify, else VerificationError: a forged
    cosignature is an error, not merely a missing one.
    """
    from cryptography.exceptions import InvalidSignature

    _, signatures = checkpoints.split_note(data)
    found: set[int] = set()
    for index, key in enumerate(keys):
        public = checkpoints.raw_public(key)
        for signature in signatures:
            if witness_key_id(signature.name, public) != signature.key_id:
                continue
            blob = signature.signature
            if len(blob) != 8 + 64:
                raise VerificationError(f"cosignature of {signature.name} is malformed")
            timestamp = int.from_bytes(blob[:8], "big")
            if timestamp > MAX_TIMESTAMP:
                raise VerificationError(f"cosignature of {signature.name} has a bad timestamp")
            try:
                key.verify(blob[8:], signed_message(body, timestamp))
            except InvalidSignature:
                raise VerificationError(
                    f"cosignature of {signature.name} does not verify"
                ) from None
            found.add(index)
    return found


@dataclass(frozen=True)
class Witnessed:
    """How a checkpoint's witnesses were counted: ``cosigned`` of the ``keys`` given verified
    on it, and ``required`` of them had to."""

    cosigned: int
    required: int
    keys: int

    def document(self) -> dict[str, int]:
        return {"cosigned": self.cosigned, "required": self.required, "keys": self.keys}

    def text(self) -> str:
        return (
            f"cosigned by {self.cosigned} of the {self.keys} witness key(s) given "
            f"({self.required} required)"
        )


def require_witnesses(data: bytes, keys: list[Ed25519PublicKey], needed: int) -> Witnessed | None:
    """At least ``needed`` (1 or more) of ``keys`` cosigned the checkpoint ``data``, and no
    line of any of them fails to verify; how many did (None with no keys). Raises
    VerificationError naming how many did, and for a quorum below 1 with keys given (they
    would count for nothing)."""
    if not keys:
        return None
    if needed < 1:
        raise VerificationError(
            f"a witness quorum of {needed} with {len(keys)} witness key(s) would count none of them"
        )
    body, _ = checkpoints.split_note(data)
    count = len(verified_witnesses(data, body, keys))
    if count < needed:
        raise VerificationError(
            f"checkpoint has {count} valid witness cosignature(s) of the given keys, "
            f"{needed} required"
        )
    return Witnessed(count, needed, len(keys))


def state_of(checkpoint: Checkpoint) -> WitnessState:
    return WitnessState(checkpoint.origin, checkpoint.size, checkpoint.root)


def state_document(state: WitnessState) -> dict[str, object]:
    return {
        "origin": state.origin,
        "size": state.size,
        "root": base64.b64encode(state.root).decode("ascii"),
    }


def parse_state(document: object, where: str) -> WitnessState:
    """A state file's content. Raises VerificationError if it is not one."""
    if not isinstance(document, dict) or set(document) != {"origin", "size", "root"}:
        raise VerificationError(f"{where} is not a witness state (origin, size, root)")
    origin, size, root = document["origin"], document["size"], document["root"]
    try:
        raw = base64.b64decode(root, validate=True) if isinstance(root, str) else b""
    except ValueError:
        raw = b""
    if (
        not isinstance(origin, str)
        or isinstance(size, bool)
        or not isinstance(size, int)
        or size < 1
        or len(raw) != merkle.HASH_SIZE
    ):
        raise VerificationError(f"{where} is not a witness state (origin, size, root)")
    return WitnessState(origin, size, raw)
