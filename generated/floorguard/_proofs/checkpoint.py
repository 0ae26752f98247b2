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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from floorguard._base._time import format_ts
from floorguard._base.folders import make_private_folder
from floorguard._chain.chain import is_chain_id, parse_any_ts
from floorguard.errors import ChainWriteError, FloorguardError, VerificationError

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


Notify = Callable[[str], object]
MEMORY_FOLDER = "checkpoints"  # in FLOORGUARD_HOME: the last checkpoint signed, per chain and key


def memory_path(home: Path, chain_id: str, public_raw: bytes) -> Path:
    """Where this host keeps the last checkpoint of chain ``chain_id`` it signed with the
    Ed25519 key whose public half is ``public_raw``: one file per chain and key."""
    kid = key_id(ORIGIN_PREFIX + chain_id, public_raw).hex()
    return home / MEMORY_FOLDER / f"{chain_id}-{kid}.txt"


def last_signed(
    path: Path, public_key: Ed25519PublicKey, chain_id: str
) -> tuple[Checkpoint | None, str | None]:
    """The checkpoint kept at ``path``, once its signature verifies with ``public_key`` and
    it is of chain ``chain_id``; else None and why not (None too when there is none). What
    the file says is never trusted unsigned: a forged, edited or foreign one is not used."""
    from floorguard._base import files
    from floorguard.errors import UnreadableFileError

    try:
        data = files.read_regular_if_exists(
            path, max_bytes=MAX_NOTE_BYTES, what="last checkpoint signed"
        )
    except UnreadableFileError as exc:
        return None, f"the last checkpoint signed cannot be read ({exc})"
    if data is None:
        return None, None
    try:
        found = verify(data, public_key)
    except VerificationError as exc:
        return None, f"the last checkpoint signed, {path}, does not verify with this key ({exc})"
    if found.chain_id != chain_id:
        return None, f"the last checkpoint signed, {path}, is of another chain ({found.chain_id})"
    return found, None


def remember(path: Path, note: str) -> None:
    """Keep ``note`` as the last checkpoint signed (atomically; folder 0700, file 0600).
    Raises OutputError."""
    from floorguard._base import atomic
    from floorguard.errors import OutputError

    try:
        make_private_folder(path.parent)
    except OSError as exc:
        why = (
            "not a folder"
            if isinstance(exc, FileExistsError | NotADirectoryError)
            else (exc.strerror or str(exc))
        )
        raise OutputError(f"{path.parent}: {why}") from exc
    atomic.write_atomic(path, note.encode("utf-8"), mode=0o600)


def of_chain(
    chain: AuditChain,
    last_seq: int | None = None,
    *,
    previous: Checkpoint | None = None,
    full: bool = False,
    notify: Notify | None = None,
) -> Checkpoint:
    """A checkpoint of ``chain`` up to ``last_seq`` (default: its head).

    A checkpoint's time says "the chain held exactly ``size`` records then" (verifiers close
    windows with it). Of the head, the chain's time read under its write lock with the head
    (a record stamped meanwhile, committed after the read, is not left before it:
    ``_time_at_head``); of an older prefix, only the time of its own last record: stamping
    it now would claim that nothing was appended after it.

    ``previous``: the last checkpoint of this chain that the caller signed, its signature
    already verified with the caller's key (``last_signed``). The records it covers were
    verified when it was signed, so only those after it are verified now (``_since``): the
    stored tree's first ``previous.size`` leaves must still hash to its root, the record
    before the new ones must be the leaf that root holds, and the new records, their leaves
    and every stored node they complete are checked; the root is then taken from those
    checked subtrees. The cost grows with the records appended since, not with the chain.
    A chain rolled back below it, or whose stored tree no longer holds it (a fork, a
    rewritten tree), is refused, with ``full`` too. Where it cannot serve (the tree lags
    the records, a checkpoint of a prefix older than it), the whole chain is verified
    instead and ``notify`` is told why.

    Without it the chain is verified from genesis, with its HMAC key and the hosts' keys
    (``AuditChain.verification_keys``: a record neither can check is refused), and the
    Merkle root is computed from its export lines then; every stored node must be the one
    the records make (so that the proofs it serves match what is signed). A tampered chain
    is never signed. Raises VerificationError (empty or tampered chain, a stored tree that
    disagrees, ``last_seq`` beyond the head, a rollback or fork behind ``previous``),
    KeyFileError and ChainError.
    """
    if not chain.exists() or chain.head() is None:
        raise VerificationError(f"no records in the audit chain {chain.location}: nothing to sign")
    if previous is not None and not full:
        made = _since(chain, previous, last_seq, notify or (lambda _: None))
        if made is not None:
            return made
    return _from_genesis(chain, last_seq, previous, notify or (lambda _: None))


def _refused(chain: AuditChain, why: str) -> VerificationError:
    return VerificationError(
        f"refusing to sign a checkpoint of the audit chain {chain.location}: {why}"
    )


def _since(
    chain: AuditChain, previous: Checkpoint, last_seq: int | None, notify: Notify
) -> Checkpoint | None:
    """The checkpoint, verifying only the records after ``previous``; None (after saying
    why) when the whole chain must be verified instead. Raises as ``of_chain``."""
    from floorguard._crypto import merkle
    from floorguard._proofs.slice_verify import SliceVerifier

    old = previous.size
    key, host_keys = chain.verification_keys()
    with chain.tree_snapshot() as snap:
        count = snap.records
        if snap.chain_id() != previous.chain_id:
            notify(
                f"the last checkpoint signed is of chain {previous.chain_id}, not of this one: "
                f"verifying all {count} records"
            )
            return None
        if count < old:
            raise _refused(
                chain,
                f"it holds {count} records, fewer than the {old} of the last checkpoint signed "
                f"of it (issued {previous.time or 'at an unknown time'}): a rollback",
            )
        if snap.size != count:
            notify(
                f"the stored Merkle tree holds {snap.size} leaves for {count} records: "
                f"verifying all {count} records"
            )
            return None
        target = count if last_seq is None else last_seq + 1
        if target > count:
            raise VerificationError(f"the audit chain has no record {last_seq}")
        if target < old:
            notify(
                f"record {target - 1} precedes the last checkpoint signed ({old} records): "
                f"verifying all {count} records"
            )
            return None
        snap.prefetch([
            *merkle.root_nodes(old), *merkle.inclusion_nodes(old - 1, old),
            *merkle.root_nodes(target), *merkle.consistency_nodes(old, target),
        ])  # fmt: skip
        # The old tree, as stored: its right edge must hash to the root signed, and the
        # record before the new ones must be the leaf that root holds (its audit path from
        # stored nodes), so that the first new record's link is checked against it.
        edge = merkle.CompactRange.of(old, snap.subtree)
        if edge.root() != previous.root:
            raise _refused(
                chain,
                f"its stored Merkle tree does not hold the tree of the last checkpoint signed "
                f"of it ({old} records, issued {previous.time or 'at an unknown time'}): the "
                "chain was forked, rolled back and appended to, or its tree rewritten",
            )
        before = snap.line(old - 1)
        path = merkle.inclusion_proof(old - 1, old, snap.subtree)
        try:
            if before is None:
                raise merkle.ProofError("no record")
            merkle.verify_inclusion(
                old - 1, old, merkle.leaf_hash(before.encode("utf-8")), path, previous.root
            )
        except merkle.ProofError:
            if before is not None and snap.subtree(0, old - 1) == merkle.leaf_hash(
                before.encode("utf-8")
            ):
                # (the record is its stored leaf: what fails is the path above it)
                raise _refused(
                    chain,
                    f"its stored Merkle tree does not lead from record {old - 1}, as stored, "
                    f"to the root of the last checkpoint signed ({old} records): the tree "
                    "was rewritten below that root (chain checkpoint --full names the node)",
                ) from None
            raise _refused(
                chain,
                f"record {old - 1} is not the record the last checkpoint signed holds (it was "
                "altered after it was signed)",
            ) from None
        found: dict[str, str] = {}

        def capture(record: ChainRecord, intact: bool) -> None:
            if record.seq == target - 1:
                found["ts"] = record.ts

        verifier = SliceVerifier(key=key, on_record=capture, host_keys=host_keys)
        stored = snap.nodes_ending(old, count)
        mismatch: list[str] = []
        roots: dict[int, bytes] = {}

        def leaves(lines: Iterable[str]) -> Iterator[str]:
            first = True
            for line in lines:
                yield line
                if first:  # record old - 1: its leaf was checked above
                    first = False
                    continue
                made = edge.append(merkle.leaf_hash(line.encode("utf-8")))
                if not mismatch:
                    for node in made:
                        problem = _stored_node_problem(node, next(stored, None))
                        if problem is not None:
                            mismatch.append(problem)
                            break
                if edge.size == target:
                    roots[target] = edge.root()

        verifier.feed_all(leaves(snap.lines(old - 1)))
        if not mismatch:
            extra = next(stored, None) or snap.stray_node(count)
            if extra is not None:
                mismatch.append(f"it holds node ({extra[0]}, {extra[1]}), which no record made")
        report = verifier.finish()
        if (
            not report.intact
            or report.first_seq != old - 1
            or report.chain_id != previous.chain_id
            or report.last_seq != count - 1
            or edge.size != count
        ):
            first = report.integrity_errors[0] if report.integrity_errors else None
            where = f" (seq {first.seq}: {first.reason})" if first is not None else ""
            raise _refused(
                chain, f"the records appended since the last checkpoint signed do not verify{where}"
            )
        if mismatch:
            raise _refused(
                chain, f"the Merkle tree stored does not match its records: {mismatch[0]}"
            )
        root = roots[target] if target > old else previous.root
        # The new tree extends the one signed: a consistency proof from the stored nodes,
        # the old part's proven by the signed root, the new part's checked just above.
        try:
            proof = merkle.consistency_proof(old, target, snap.subtree)
            merkle.verify_consistency(old, target, previous.root, root, proof)
        except merkle.ProofError as exc:
            raise _refused(
                chain, f"the stored tree does not extend the last one signed ({exc})"
            ) from None
        if merkle.root(target, snap.subtree) != root:
            raise _refused(chain, "the Merkle tree stored does not match its records")
        stamp = found.get("ts") if target > old else snap.ts_at(target - 1)
        if stamp is None:
            raise VerificationError(f"the audit chain has no record {target - 1}")
    if target == count:
        stamp = _time_at_head(chain, count, stamp, notify)
    return new_checkpoint(previous.chain_id, target, root, stamp)


def _from_genesis(
    chain: AuditChain, last_seq: int | None, previous: Checkpoint | None, notify: Notify
) -> Checkpoint:
    """The checkpoint, verifying every record from genesis (and, given the last checkpoint
    signed, that the chain still holds its tree). Raises as ``of_chain``."""
    from floorguard._crypto import merkle
    from floorguard._proofs.slice_verify import SliceVerifier

    found: dict[str, str] = {}

    def capture(record: ChainRecord, intact: bool) -> None:
        if record.seq == last_seq:
            found["ts"] = record.ts

    tree = merkle.CompactRange()
    roots: dict[int, bytes] = {}
    key, host_keys = chain.verification_keys()
    verifier = SliceVerifier(key=key, on_record=capture, host_keys=host_keys)
    held = None if previous is None else previous.size
    # The records and the stored tree from one snapshot: every node a proof could be made
    # of is checked against the records before anything is signed, not only the root's.
    # (A mismatch is reported after the records' own verification: an altered record is
    # named as such rather than by the node it no longer matches.)
    mismatch: list[str] = []
    with chain.tree_snapshot() as snap:
        stored = snap.nodes()
        same_chain = previous is not None and snap.chain_id() == previous.chain_id

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
                if tree.size in (last_seq + 1 if last_seq is not None else None, held):
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
    if previous is not None and same_chain:
        # The chain verifies by itself; it must also still be the one signed before.
        if tree.size < previous.size:
            raise _refused(
                chain,
                f"it holds {tree.size} records, fewer than the {previous.size} of the last "
                f"checkpoint signed of it (issued {previous.time or 'at an unknown time'}): "
                "a rollback",
            )
        if roots.get(previous.size) != previous.root:
            raise _refused(
                chain,
                f"its first {previous.size} records are not the tree of the last checkpoint "
                f"signed of it (issued {previous.time or 'at an unknown time'}): the chain was "
                "forked or rewritten",
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
    if size == report.last_seq + 1 and report.last_ts is not None:
        stamp = _time_at_head(chain, size, report.last_ts, notify)
    else:
        stamp = found["ts"]
    return new_checkpoint(report.chain_id, size, roots[size], stamp)


def _time_at_head(chain: AuditChain, size: int, last_ts: str, notify: Notify) -> str:
    """The time a checkpoint of the chain's first ``size`` records, all it held when read,
    states: the chain's time read under its write lock, when it still holds exactly those
    records (no record appended after can be stamped before it); else, as a prefix's, the
    time of its last record ``last_ts`` (which closes no window past that record)."""
    try:
        count, now = chain.records_and_time()
    except ChainWriteError as exc:
        notify(
            f"the chain's time cannot be read under its write lock ({exc}): the checkpoint "
            "states the time of its last record"
        )
        return last_ts
    if count != size:
        notify(
            f"the chain holds {count} records now, not the {size} signed: the checkpoint "
            "states the time of its last record"
        )
        return last_ts
    return now


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
