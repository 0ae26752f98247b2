"""Signed checkpoints of the audit chain: C2SP tlog-checkpoint bodies in C2SP signed notes.

A checkpoint states, under an Ed25519 signature, that the chain ``chain_id`` held ``size``
records and that the RFC 6962 Merkle tree hash of those records (leaf input: each record's
export line, ``floorguard._crypto.merkle``) was ``root``. A verifier holding only the public
key (not the HMAC secret) can then check an inclusion proof of one record, a consistency proof
between two checkpoints, or a whole slice from genesis, and detect any change, deletion,
reordering or truncation of the records up to that size.

Body (the note text, every line ending in a newline)::

    floorguard/<chain_id>          origin
    <size>                          decimal, no leading zeroes
    <base64 of the 32 root bytes>   standard base64, padded
    time <RFC 3339 UTC with Z>      optional extension line: when the checkpoint was issued

The ``time`` line is an extension line (opaque to generic C2SP tooling, which ignores it);
floorguard writes one, reads a checkpoint without it, and refuses two. Other extension
lines are ignored, as the spec asks.

The old format (before the tree) had the same lines, but its root was the digest of record
``size - 1`` (the hash-chain head). Nothing in the note tells the two apart, so a verifier
that holds that record says "old format" when the root is its digest (``old_format_reason``);
without it an old checkpoint simply matches no proof.

Signature (C2SP signed-note): a blank line, then ``— <key name> <base64(key id || sig)>``
where the key name is the origin, the signature is Ed25519 over the note text (with its
final newline), and the key id is the first four bytes of
SHA-256(key name || 0x0A || 0x01 || 32-byte public key). ``cryptography`` is imported lazily.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from floorguard._base._time import format_ts
from floorguard._chain.chain import is_chain_id, parse_any_ts
from floorguard.errors import FloorguardError, VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from floorguard._chain.chain import AuditChain, ChainRecord

ORIGIN_PREFIX = "floorguard/"
EM_DASH = "\u2014"
ED25519_TYPE = b"\x01"
TIME_PREFIX = "time "
MAX_NOTE_BYTES = 64 * 1024
MAX_SIGNATURES = 64
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")
_UTC_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z")


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint states: the chain, its size, its Merkle root and the issue time."""

    chain_id: str
    size: int
    root: bytes
    time: str | None

    @property
    def origin(self) -> str:
        return ORIGIN_PREFIX + self.chain_id

    def body(self) -> str:
        """The C2SP tlog-checkpoint note text (ends with a newline)."""
        root = base64.b64encode(self.root).decode()
        stamp = "" if self.time is None else f"{TIME_PREFIX}{self.time}\n"
        return f"{self.origin}\n{self.size}\n{root}\n{stamp}"


def old_format_reason(checkpoint: Checkpoint, last_record_digest: str) -> str | None:
    """Why ``checkpoint`` is one of the old format, given the digest of its record
    ``size - 1``; None when its root is not that digest."""
    if "sha256:" + checkpoint.root.hex() != last_record_digest:
        return None
    return (
        f"the checkpoint is in the old format: its root is the hash-chain head (the digest "
        f"of record {checkpoint.size - 1}), not a Merkle tree hash; sign a new checkpoint "
        "with `floorctl chain checkpoint`"
    )


def key_id(name: str, public_raw: bytes) -> bytes:
    """The C2SP signed-note key id of an Ed25519 key: SHA-256(name \\n 0x01 key)[:4]."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + ED25519_TYPE + public_raw).digest()[:4]


def verifier_key(name: str, public_raw: bytes) -> str:
    """The signed-note verifier key ``<name>+<key id, 8 hex>+<base64(0x01 || key)>``, the
    form Go's golang.org/x/mod/sumdb/note (note.NewVerifier) reads. For a checkpoint the
    name is its origin, so the key is one chain's."""
    encoded = base64.b64encode(ED25519_TYPE + public_raw).decode("ascii")
    return f"{name}+{key_id(name, public_raw).hex()}+{encoded}"


def signature_line(name: str, public_raw: bytes, signature: bytes) -> str:
    """``— <name> <base64(key id || signature)>`` with its newline."""
    blob = base64.b64encode(key_id(name, public_raw) + signature).decode("ascii")
    return f"{EM_DASH} {name} {blob}\n"


def raw_public(key: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def new_checkpoint(
    chain_id: str, size: int, root: bytes, time: str | None = None, *, stamped: bool = True
) -> Checkpoint:
    """A checkpoint of ``size`` records whose Merkle tree hash is ``root``.

    The time is now unless given; ``stamped=False`` writes no time line. Raises
    VerificationError for values it cannot state.
    """
    from floorguard._base._time import utc_now

    if not is_chain_id(chain_id):
        raise VerificationError(f"cannot checkpoint chain id {chain_id!r}: not 32 hex characters")
    if size < 1:
        raise VerificationError("cannot checkpoint an empty chain")
    if not isinstance(root, bytes) or len(root) != 32:
        raise VerificationError("cannot checkpoint a root that is not 32 bytes")
    stamp = None if not stamped else time if time is not None else format_ts(utc_now())
    return Checkpoint(chain_id, size, root, stamp)


def sign(checkpoint: Checkpoint, private_key: Ed25519PrivateKey) -> str:
    """The signed note: body, blank line, one signature line keyed by the origin."""
    body = checkpoint.body()
    signature = private_key.sign(body.encode("utf-8"))
    public = raw_public(private_key.public_key())
    return body + "\n" + signature_line(checkpoint.origin, public, signature)


@dataclass(frozen=True)
class NoteSignature:
    name: str
    key_id: bytes
    signature: bytes


def split_note(data: bytes) -> tuple[str, tuple[NoteSignature, ...]]:
    """The note text and its signature lines. Raises VerificationError if malformed."""
    if len(data) > MAX_NOTE_BYTES:
        raise VerificationError(f"checkpoint is larger than {MAX_NOTE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VerificationError("checkpoint is not UTF-8") from exc
    if any(ch < " " and ch != "\n" for ch in text):
        raise VerificationError("checkpoint holds a control character other than newline")
    if not text.endswith("\n"):
        raise VerificationError("checkpoint does not end with a newline")
    cut = text.rfind("\n\n")
    if cut < 0:
        raise VerificationError("checkpoint has no blank line before its signatures")
    body, block = text[: cut + 1], text[cut + 2 :]
    signatures = []
    for line in block.split("\n")[:-1]:
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != EM_DASH or not parts[1] or "+" in parts[1]:
            raise VerificationError(f"malformed signature line {line!r}")
        try:
            blob = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise VerificationError("signature line is not valid base64") from exc
        if base64.b64encode(blob).decode("ascii") != parts[2]:
            raise VerificationError("signature line is not canonical base64")
        if len(blob) < 5:
            raise VerificationError("signature line is too short to hold a key id")
        signatures.append(NoteSignature(parts[1], blob[:4], blob[4:]))
    if not signatures:
        raise VerificationError("checkpoint has no signature lines")
    if len(signatures) > MAX_SIGNATURES:
        raise VerificationError(f"checkpoint has more than {MAX_SIGNATURES} signatures")
    return body, tuple(signatures)


def parse_body(body: str) -> Checkpoint:
    """Read a tlog-checkpoint body written by ``Checkpoint.body``. Raises VerificationError."""
    lines = body.split("\n")[:-1]
    if len(lines) < 3 or any(not line for line in lines):
        raise VerificationError("checkpoint body needs at least three non-empty lines")
    origin, size_text, root_text, *extensions = lines
    chain_id = origin.removeprefix(ORIGIN_PREFIX)
    if not origin.startswith(ORIGIN_PREFIX) or not is_chain_id(chain_id):
        raise VerificationError(f"checkpoint origin {origin!r} is not floorguard/<chain id>")
    if not _SIZE.fullmatch(size_text) or size_text == "0":
        raise VerificationError(f"checkpoint size {size_text!r} is not a positive decimal")
    try:
        root = base64.b64decode(root_text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VerificationError("checkpoint root is not valid base64") from exc
    if len(root) != 32 or base64.b64encode(root).decode() != root_text:
        raise VerificationError("checkpoint root is not the base64 of 32 bytes")
    times = [line[len(TIME_PREFIX) :] for line in extensions if line.startswith(TIME_PREFIX)]
    if len(times) > 1:
        raise VerificationError("checkpoint has more than one 'time <RFC 3339>' line")
    stamp = times[0] if times else None
    if stamp is not None:
        if not _UTC_Z.fullmatch(stamp):
            raise VerificationError(f"checkpoint time {stamp!r} is not RFC 3339 UTC with Z")
        try:
            parse_any_ts(stamp)
        except FloorguardError as exc:
            raise VerificationError(f"checkpoint time {stamp!r} is not RFC 3339") from exc
    return Checkpoint(chain_id, int(size_text), root, stamp)


def verify(data: bytes, public_key: Ed25519PublicKey) -> Checkpoint:
    """Verify a signed checkpoint against ``public_key`` and return what it states.

    Signature lines from other keys are ignored (C2SP signed-note); a line whose name and
    key id both match ``public_key`` under the checkpoint's origin must verify. Raises
    VerificationError when the note is malformed, no matching signature exists ("signed
    by an unknown key"), or a matching signature fails.
    """
    from cryptography.exceptions import InvalidSignature

    body, signatures = split_note(data)
    checkpoint = parse_body(body)
    name = checkpoint.origin
    expected = key_id(name, raw_public(public_key))
    matching = [s for s in signatures if s.name == name and s.key_id == expected]
    if not matching:
        raise VerificationError(
            f"checkpoint is signed by an unknown key (no signature by {name} with key id "
            f"{expected.hex()}, the given public key)"
        )
    for signature in matching:
        try:
            public_key.verify(signature.signature, body.encode("utf-8"))
        except InvalidSignature:
            raise VerificationError("checkpoint signature does not verify") from None
    return checkpoint


def of_chain(chain: AuditChain, last_seq: int | None = None) -> Checkpoint:
    """A checkpoint of ``chain`` up to ``last_seq`` (default: its head).

    A checkpoint's time says "the chain held exactly ``size`` records then" (verifiers close
    windows with it). Of the head that is now; of an older prefix, only the time of its own
    last record: stamping it now would claim that nothing was appended after it.

    The chain is verified from genesis first, with its HMAC key and the hosts' keys
    (``AuditChain.verification_keys``: a record neither can check is refused), and the
    Merkle root is computed from its export lines then; the stored tree must state the same
    root (so that the proofs it serves match what is signed). A tampered chain is never
    signed. Raises VerificationError (empty or tampered chain, a stored tree that disagrees,
    ``last_seq`` beyond the head), KeyFileError and ChainError.
    """
    from floorguard._crypto import merkle
    from floorguard._proofs.slice_verify import SliceVerifier

    if not chain.exists() or chain.head() is None:
        raise VerificationError(f"no records in the audit chain {chain.location}: nothing to sign")
    found: dict[str, str] = {}

    def capture(record: ChainRecord, intact: bool) -> None:
        if record.seq == last_seq:
            found["ts"] = record.ts

    tree = merkle.CompactRange()
    roots: dict[int, bytes] = {}
    key, host_keys = chain.verification_keys()
    verifier = SliceVerifier(key=key, on_record=capture, host_keys=host_keys)
    # The records and the stored tree from one snapshot: every node a proof could be made
    # of is checked against the records before anything is signed, not only the root's.
    # (A mismatch is reported after the records' own verification: an altered record is
    # named as such rather than by the node it no longer matches.)
    mismatch: list[str] = []
    with chain.tree_snapshot() as snap:
        stored = snap.nodes()

        def leaves(lines: Iterable[str]) -> Iterator[str]:
            for line in lines:
                made = tree.append(merkle.leaf_hash(line.encode("utf-8")))
                # A chain from before the tree has no stored nodes past snap.size.
                if not mismatch and tree.size <= snap.size:
                    for node in made:
                        problem = _stored_node_problem(node, next(stored, None))
                        if problem is not None:
                            mismatch.append(problem)
                            break
                if last_seq is not None and tree.size == last_seq + 1:
                    roots[tree.size] = tree.root()
                yield line

        verifier.feed_all(leaves(snap.lines()))
        extra = None if mismatch else next(stored, None)
        if extra is not None:
            mismatch.append(f"it holds node ({extra[0]}, {extra[1]}), which no record made")
    report = verifier.finish()
    if not report.intact or report.first_seq != 0 or report.chain_id is None:
        first = report.integrity_errors[0] if report.integrity_errors else None
        where = f" (seq {first.seq}: {first.reason})" if first is not None else ""
        raise VerificationError(
            f"refusing to sign a checkpoint: the audit chain {chain.location} does not "
            f"verify{where}"
        )
    if report.last_seq is None:
        raise VerificationError(f"no records in the audit chain {chain.location}")
    if mismatch:
        raise VerificationError(
            f"refusing to sign a checkpoint: the Merkle tree stored in {chain.location} does "
            f"not match its records: {mismatch[0]}"
        )
    size = report.last_seq + 1 if last_seq is None else last_seq + 1
    if last_seq is None:
        roots[size] = tree.root()
    if size not in roots or (last_seq is not None and "ts" not in found):
        raise VerificationError(f"the audit chain has no record {last_seq}")
    if stored_root(chain, size) != roots[size]:
        raise VerificationError(
            f"refusing to sign a checkpoint: the Merkle tree stored in {chain.location} does "
            "not match its records (a record was altered after it was appended)"
        )
    at_head = size == report.last_seq + 1
    return new_checkpoint(report.chain_id, size, roots[size], None if at_head else found["ts"])


def _stored_node_problem(
    made: tuple[int, int, bytes], stored: tuple[int, int, bytes] | None
) -> str | None:
    """What is wrong with ``stored``, the next node of the stored tree, when it is not the
    node ``made`` from the records; None when it is."""
    level, index, digest = made
    if stored is None or stored[:2] != (level, index):
        return f"it lacks node ({level}, {index})"
    if stored[2] != digest:
        return f"node ({level}, {index}) holds another hash (altered after the append)"
    return None


def stored_root(chain: AuditChain, size: int) -> bytes | None:
    """The root of the first ``size`` records by the chain's stored tree, built first if
    the chain predates it; None when the chain is shorter. Raises ChainError."""
    from floorguard._crypto import merkle

    with chain.tree_snapshot() as snap:
        if snap.size >= size:
            return merkle.root(size, snap.subtree)
        short = snap.records >= size
    if not short:
        return None
    chain.ensure_tree()
    with chain.tree_snapshot() as snap:
        return merkle.root(size, snap.subtree) if snap.size >= size else None
