"""The audit chain as a transparency log: inclusion and consistency proof documents.

An inclusion proof (``floorctl chain prove``) is the JSON object::

    {"origin": "floorguard/<chain id>", "tree_size": N, "leaf_index": I,
     "record": "<the export line of record I, without its newline>",
     "hashes": ["<base64 of 32 bytes>", ...]}

and shows, with a checkpoint of size N signed by the log's key, that this exact record is
leaf I of that log (RFC 9162 2.1.3). A consistency proof (``floorctl chain consistency``)::

    {"origin": ..., "old_size": M, "new_size": N, "hashes": [...]}

shows that the log of the newer checkpoint extends the older one, record for record
(RFC 9162 2.1.4). Both are checked offline with the public key alone. Proofs are made from
the chain's stored tree (``AuditChain.tree_snapshot``) and checked against the signed root
before they are written, so a proof this module hands out always verifies.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from floorguard._base._canonical import MAX_NESTING, nests_deeper_than
from floorguard._crypto import merkle
from floorguard._proofs import checkpoint as checkpoints
from floorguard.chainstore.interface import FirstReads
from floorguard.errors import FloorguardError, VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from floorguard._chain.chain import AuditChain, ChainRecord, TreeSnapshot
    from floorguard._proofs.checkpoint import Checkpoint
    from floorguard._proofs.witness import Witnessed

MAX_PROOF_BYTES = 4 * 1024 * 1024  # a record (receipt up to 1 MiB) and 64 hashes
MAX_HASHES = 128


@dataclass(frozen=True)
class InclusionProof:
    origin: str
    tree_size: int
    leaf_index: int
    record: str
    hashes: tuple[bytes, ...]

    def document(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "tree_size": self.tree_size,
            "leaf_index": self.leaf_index,
            "record": self.record,
            "hashes": [base64.b64encode(h).decode("ascii") for h in self.hashes],
        }


@dataclass(frozen=True)
class ConsistencyProof:
    origin: str
    old_size: int
    new_size: int
    hashes: tuple[bytes, ...]

    def document(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "old_size": self.old_size,
            "new_size": self.new_size,
            "hashes": [base64.b64encode(h).decode("ascii") for h in self.hashes],
        }


def proof_text(proof: InclusionProof | ConsistencyProof) -> str:
    """The proof file's text: one JSON object with sorted keys and a final newline."""
    return json.dumps(proof.document(), sort_keys=True, ensure_ascii=False) + "\n"


# --- reading proof files -----------------------------------------------------------------------


def _object(data: bytes, what: str, keys: set[str]) -> dict[str, Any]:
    if len(data) > MAX_PROOF_BYTES:
        raise VerificationError(f"{what} is larger than {MAX_PROOF_BYTES} bytes")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) != len(pairs):
            raise VerificationError(f"{what} repeats a key")
        return found

    try:
        text = data.decode("utf-8")
        if nests_deeper_than(text):
            raise VerificationError(f"{what} nests deeper than {MAX_NESTING} levels")
        value = json.loads(text, object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise VerificationError(f"{what} is not a JSON document ({exc})") from exc
    if not isinstance(value, dict) or set(value) != keys:
        raise VerificationError(f"{what} must be an object with exactly {', '.join(sorted(keys))}")
    return value


def _count(value: object, name: str, what: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise VerificationError(f"{what}: {name} is not an integer of at least {minimum}")
    return value


def _hashes(value: object, what: str) -> tuple[bytes, ...]:
    if not isinstance(value, list) or len(value) > MAX_HASHES:
        raise VerificationError(f"{what}: hashes is not a list of at most {MAX_HASHES}")
    found = []
    for item in value:
        try:
            raw = base64.b64decode(item, validate=True) if isinstance(item, str) else b""
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != merkle.HASH_SIZE or base64.b64encode(raw).decode() != item:
            raise VerificationError(f"{what}: a hash is not the base64 of 32 bytes")
        found.append(raw)
    return tuple(found)


def _origin(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.startswith(checkpoints.ORIGIN_PREFIX):
        raise VerificationError(f"{what}: origin is not floorguard/<chain id>")
    return value


def parse_inclusion(data: bytes, what: str = "inclusion proof") -> InclusionProof:
    """An inclusion proof file's content. Raises VerificationError if malformed."""
    doc = _object(data, what, {"origin", "tree_size", "leaf_index", "record", "hashes"})
    record = doc["record"]
    if not isinstance(record, str):
        raise VerificationError(f"{what}: record is not a string (the export line)")
    return InclusionProof(
        _origin(doc["origin"], what),
        _count(doc["tree_size"], "tree_size", what, minimum=1),
        _count(doc["leaf_index"], "leaf_index", what, minimum=0),
        record,
        _hashes(doc["hashes"], what),
    )


def parse_consistency(data: bytes, what: str = "consistency proof") -> ConsistencyProof:
    """A consistency proof file's content. Raises VerificationError if malformed."""
    doc = _object(data, what, {"origin", "old_size", "new_size", "hashes"})
    return ConsistencyProof(
        _origin(doc["origin"], what),
        _count(doc["old_size"], "old_size", what, minimum=1),
        _count(doc["new_size"], "new_size", what, minimum=1),
        _hashes(doc["hashes"], what),
    )


def record_of_line(line: str) -> ChainRecord:
    """The record an export line states; VerificationError unless it is one, canonical."""
    from floorguard._chain.chain import RECORD_FIELDS, ChainRecord

    if nests_deeper_than(line):
        raise VerificationError(f"the record nests deeper than {MAX_NESTING} levels")
    try:
        fields = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise VerificationError(f"the record is not JSON ({exc})") from exc
    if not isinstance(fields, dict) or set(fields) != set(RECORD_FIELDS):
        raise VerificationError("the record does not have the eight fields of a chain record")
    if type(fields["seq"]) is not int:
        # JSON true would pass isinstance(..., int) as seq 1 (and canonicalises as true).
        raise VerificationError("the record's seq is not an integer")
    try:
        record = ChainRecord(**fields)
        canonical = record.to_json_line()
    except (TypeError, RecursionError, FloorguardError) as exc:
        raise VerificationError(f"the record cannot be canonicalised: {exc}") from exc
    if canonical != line:
        raise VerificationError("the record is not a canonical export line")
    # Proven included or not, a receipt the verifiers would refuse is not vouched for here.
    from floorguard._chain.receipts import shape_problem

    problem = shape_problem(record.event, record.receipt)
    if problem is not None:
        raise VerificationError(f"the record's receipt is malformed: {problem}")
    return record


# --- making proofs from the chain ----------------------------------------------------------------


@contextlib.contextmanager
def _snapshot_for(chain: AuditChain, first: FirstReads | None = None) -> Iterator[TreeSnapshot]:
    """One snapshot of the chain and its tree, read on one connection (``first``: what it
    will read first); a chain from before the tree gets its tree built first (then read
    afresh)."""
    with chain.tree_snapshot(first) as snap:
        if not snap.present and not chain.exists():
            from floorguard.errors import ChainError

            raise ChainError(f"no audit chain at {chain.location}: nothing has been recorded yet")
        if snap.size >= snap.records:
            yield snap
            return
    chain.ensure_tree()
    with chain.tree_snapshot(first) as snap:
        yield snap


def _head_size(chain: AuditChain, snap: TreeSnapshot) -> int:
    """The size of the tree a proof may speak of: the stored tree's, which must not hold a
    leaf the records do not (else proofs would describe records that are not in the chain).
    Raises VerificationError."""
    if snap.size > snap.records:
        raise VerificationError(
            f"the stored Merkle tree of {chain.location} holds {snap.size} leaves but the chain "
            f"only {snap.records} records (records were deleted or the tree was altered): no "
            "proof was written"
        )
    return snap.size


def _origin_of(snap: TreeSnapshot) -> str:
    chain_id = snap.chain_id()
    if chain_id is None:
        raise VerificationError("the audit chain holds no records")
    return checkpoints.ORIGIN_PREFIX + chain_id


def _mismatch(snap: TreeSnapshot, cp: Checkpoint, name: str) -> VerificationError:
    last = snap.line(cp.size - 1)
    if last is not None:
        reason = checkpoints.old_format_reason(cp, record_of_line(last).digest())
        if reason is not None:
            return VerificationError(f"{name}: {reason}")
    return VerificationError(
        f"{name}: its root is not the Merkle tree hash of this chain's first {cp.size} "
        "records (another log, a fork, or a record changed since it was signed)"
    )


def _check_checkpoint_of(snap: TreeSnapshot, cp: Checkpoint, name: str, origin: str) -> None:
    """That ``cp`` is of this chain and no larger than its tree. Raises VerificationError."""
    if cp.origin != origin:
        raise VerificationError(f"{name} is for {cp.origin}, but the chain is {origin}")
    if cp.size > snap.size:
        raise VerificationError(f"{name} covers {cp.size} records but the chain holds {snap.size}")


def _check_checkpoint(snap: TreeSnapshot, cp: Checkpoint, name: str, origin: str) -> None:
    """That ``cp`` is of this chain and states the root its stored tree has at that size
    (the nodes it needs prefetched). Raises VerificationError."""
    _check_checkpoint_of(snap, cp, name, origin)
    if merkle.root(cp.size, snap.subtree) != cp.root:
        raise _mismatch(snap, cp, name)


def prove_inclusion(
    chain: AuditChain,
    *,
    seq: int | None = None,
    receipt_id: str | None = None,
    checkpoint: Checkpoint | None = None,
) -> InclusionProof:
    """The inclusion proof of record ``seq`` (or of receipt ``receipt_id``) in the tree of
    the checkpoint's size (the head's when none is given).

    One read snapshot; the nodes the proof needs are read in one query, and the root is
    computed once: from the proof, checked against the checkpoint's (without one, against
    the root of the stored tree's right edge). Raises VerificationError (no such record, a
    checkpoint of another log or one the stored tree does not match, a stored leaf that is
    not its record's line) and ChainError.
    """
    # Without a checkpoint the proof leads to the stored tree's own root: this host
    # witnesses that tree as it does an append's (a smaller or inconsistent one is refused
    # and recorded), so a tree rewritten up to its root is no proof.
    views = chain.views if checkpoint is None else None
    before = None if views is None else views.load()
    first, known = None, None
    if receipt_id is None and seq is not None and checkpoint is not None:
        # The checkpoint's size and the seq name every node the proof reads: they are
        # read with the snapshot's start (a store a round trip away reads them in its).
        known = _proof_nodes(seq, checkpoint.size)
        first = FirstReads(known[1], seq)
    with _snapshot_for(chain, first) as snap:
        if receipt_id is not None:
            seq = snap.seq_of(receipt_id)
            if seq is None:
                raise VerificationError(f"no record of receipt {receipt_id} in the audit chain")
        if seq is None:
            raise VerificationError("give a record: --seq N or --receipt-id ID")
        size = _head_size(chain, snap)
        origin = _origin_of(snap)
        if checkpoint is not None:
            _check_checkpoint_of(snap, checkpoint, "the checkpoint", origin)
            size = checkpoint.size
        # The nodes each hash of the proof folds, read with the leaf and the record in one
        # round trip (none for a seq beyond the tree: it may lie beyond SQLite's integers).
        within = 0 <= seq < size
        # (with a checkpoint, its size is the size: the nodes were found before the read)
        path, wanted = known if known is not None else _proof_nodes(seq, size)
        if checkpoint is None:
            wanted += merkle.root_nodes(size)
        snap.prefetch(wanted, line=seq if within else None)

        def stated() -> None:
            # Only once something is wrong: a checkpoint the stored tree does not state is
            # named as such before what follows from it.
            if checkpoint is not None and merkle.root(size, snap.subtree) != checkpoint.root:
                raise _mismatch(snap, checkpoint, "the checkpoint")

        # Compared first: a seq beyond SQLite's integers would not even be looked up.
        line = snap.line(seq) if seq < size else None
        if line is None:
            stated()
            raise VerificationError(f"the tree of {size} records has no record {seq}")
        holds = None if receipt_id is None else record_of_line(line).receipt_id
        if holds != receipt_id:
            # (the store named the record: a hostile one may name another)
            raise VerificationError(
                f"the audit chain named record {seq} for receipt {receipt_id}, but that record "
                f"holds receipt {holds} (the database was altered)"
            )
        leaf = merkle.leaf_hash(line.encode("utf-8"))
        if snap.subtree(0, seq) != leaf:
            stated()
            raise VerificationError(
                f"record {seq} does not hash to the leaf the stored tree holds for it: record "
                f"{seq} or the leaf the stored tree holds for it was altered after it was "
                "appended (verify chain, which reads the records alone, tells which)"
            )
        hashes = snap.hashes(path)
        root = checkpoint.root if checkpoint is not None else merkle.root(size, snap.subtree)
        try:
            merkle.verify_inclusion(seq, size, leaf, hashes, root)
        except merkle.ProofError as exc:
            stated()
            raise _inconsistent(chain) from exc
        chain_id = snap.chain_id()
    if views is not None and before is not None and chain_id is not None:
        views.observe(
            before, chain_id, size, root, location=chain.location,
            root_of=lambda m: _stored_root(chain, m), doing="prove a record of",
        )  # fmt: skip
    return InclusionProof(origin, size, seq, line, tuple(hashes))


def _proof_nodes(seq: int, size: int) -> tuple[list[list[tuple[int, int]]], list[tuple[int, int]]]:
    """The inclusion path of leaf ``seq`` in a tree of ``size`` leaves, and every node it
    reads with the leaf's own; nothing for a leaf beyond the tree."""
    if not 0 <= seq < size:
        return [], []
    path = merkle.inclusion_path(seq, size)
    return path, [(0, seq), *itertools.chain.from_iterable(path)]


def _stored_root(chain: AuditChain, size: int) -> bytes:
    found = checkpoints.stored_root(chain, size)
    if found is None:
        raise VerificationError(f"the audit chain {chain.location} has fewer than {size} records")
    return found


def prove_consistency(
    chain: AuditChain, old: Checkpoint, new: Checkpoint | None = None
) -> ConsistencyProof:
    """The consistency proof from checkpoint ``old`` to ``new`` (the head when None).

    One read snapshot, its nodes read in one query. Raises VerificationError (a checkpoint
    of another log, or whose root the chain's tree does not state: a fork or a rewritten
    record; an old tree larger than the new) and ChainError.
    """
    with _snapshot_for(chain) as snap:
        size = _head_size(chain, snap)
        origin = _origin_of(snap)
        sizes = [cp.size for cp in (old, new) if cp is not None and cp.size <= snap.size]
        if new is not None and new.size <= snap.size:
            size = new.size
        wanted = [node for n in {*sizes, size} for node in merkle.root_nodes(n)]
        if 0 < old.size <= size:
            wanted += merkle.consistency_nodes(old.size, size)
        snap.prefetch(wanted)
        _check_checkpoint(snap, old, "the old checkpoint", origin)
        if new is not None:
            _check_checkpoint(snap, new, "the new checkpoint", origin)
        if old.size > size:
            raise VerificationError(
                f"the old checkpoint covers {old.size} records, more than the new one's {size}"
            )
        new_root = new.root if new is not None else merkle.root(size, snap.subtree)
        hashes = merkle.consistency_proof(old.size, size, snap.subtree)
        try:
            merkle.verify_consistency(old.size, size, old.root, new_root, hashes)
        except merkle.ProofError as exc:
            raise _inconsistent(chain) from exc
        return ConsistencyProof(old.origin, old.size, size, tuple(hashes))


def _inconsistent(chain: AuditChain) -> VerificationError:
    return VerificationError(
        f"the stored Merkle tree of {chain.location} does not hold together (the database was "
        "altered): no proof was written"
    )


# --- checking proofs offline -------------------------------------------------------------------


@dataclass(frozen=True)
class InclusionResult:
    checkpoint: Checkpoint
    record: ChainRecord
    # How the checkpoint's witnesses counted, when witness keys were given.
    witnessed: Witnessed | None = None

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "verified": True,
            "origin": self.checkpoint.origin,
            "tree_size": self.checkpoint.size,
            "leaf_index": self.record.seq,
            "event": self.record.event,
            "receipt_id": self.record.receipt_id,
            "ts": self.record.ts,
        }
        if self.witnessed is not None:
            document["witnesses"] = self.witnessed.document()
        return document

    def text(self) -> str:
        cosigned = "" if self.witnessed is None else f"; the checkpoint {self.witnessed.text()}"
        return (
            f"VERIFIED: record {self.record.seq} ({self.record.event}, receipt "
            f"{self.record.receipt_id}) is leaf {self.record.seq} of the "
            f"{self.checkpoint.size}-record log {self.checkpoint.origin}{cosigned}\n"
        )


def check_inclusion(proof: InclusionProof, cp: Checkpoint) -> ChainRecord:
    """Check ``proof`` against the verified checkpoint ``cp``; the record it proves.

    Raises VerificationError naming what does not match.
    """
    if proof.origin != cp.origin:
        raise VerificationError(f"the proof is for {proof.origin}, the checkpoint for {cp.origin}")
    if proof.tree_size != cp.size:
        raise VerificationError(
            f"the proof is for a tree of {proof.tree_size} records, the checkpoint's has {cp.size}"
        )
    record = record_of_line(proof.record)
    if record.seq != proof.leaf_index:
        raise VerificationError(
            f"the record is seq {record.seq} but the proof places it at leaf {proof.leaf_index}"
        )
    if checkpoints.ORIGIN_PREFIX + record.chain_id != cp.origin:
        raise VerificationError(f"the record belongs to chain {record.chain_id}, not {cp.origin}")
    leaf = merkle.leaf_hash(proof.record.encode("utf-8"))
    try:
        merkle.verify_inclusion(proof.leaf_index, proof.tree_size, leaf, proof.hashes, cp.root)
    except merkle.ProofError as exc:
        if proof.leaf_index == cp.size - 1:
            reason = checkpoints.old_format_reason(cp, record.digest())
            if reason is not None:
                raise VerificationError(reason) from exc
        raise VerificationError(
            f"{exc}: this record is not leaf {proof.leaf_index} of the checkpoint's log (or "
            "the checkpoint is in the old format, whose root is a hash-chain head)"
        ) from exc
    return record


def verify_inclusion(
    proof_data: bytes, checkpoint_data: bytes, public_key: Ed25519PublicKey
) -> InclusionResult:
    """Verify a signed checkpoint, then the inclusion proof against it. Raises
    VerificationError."""
    cp = checkpoints.verify(checkpoint_data, public_key)
    record = check_inclusion(parse_inclusion(proof_data), cp)
    return InclusionResult(cp, record)


@dataclass(frozen=True)
class ConsistencyResult:
    old: Checkpoint
    new: Checkpoint
    # How each checkpoint's witnesses counted, when witness keys were given.
    old_witnessed: Witnessed | None = None
    new_witnessed: Witnessed | None = None

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "verified": True,
            "origin": self.new.origin,
            "old_size": self.old.size,
            "new_size": self.new.size,
        }
        if self.old_witnessed is not None and self.new_witnessed is not None:
            document["witnesses"] = {
                "old": self.old_witnessed.document(),
                "new": self.new_witnessed.document(),
            }
        return document

    def text(self) -> str:
        cosigned = ""
        if self.old_witnessed is not None and self.new_witnessed is not None:
            cosigned = (
                f"; the old checkpoint {self.old_witnessed.text()}, the new one "
                f"{self.new_witnessed.text()}"
            )
        return (
            f"VERIFIED: the {self.new.size}-record log {self.new.origin} extends its first "
            f"{self.old.size} records, record for record{cosigned}\n"
        )


def check_consistency(proof: ConsistencyProof, old: Checkpoint, new: Checkpoint) -> None:
    """Check ``proof`` between two verified checkpoints. Raises VerificationError."""
    if not old.origin == new.origin == proof.origin:
        raise VerificationError(
            f"the checkpoints and the proof name different logs ({old.origin}, {new.origin}, "
            f"{proof.origin})"
        )
    if (proof.old_size, proof.new_size) != (old.size, new.size):
        raise VerificationError(
            f"the proof is from size {proof.old_size} to {proof.new_size}, the checkpoints "
            f"are of sizes {old.size} and {new.size}"
        )
    try:
        merkle.verify_consistency(old.size, new.size, old.root, new.root, proof.hashes)
    except merkle.ProofError as exc:
        raise VerificationError(
            f"{exc}: the newer log does not extend the older one (a fork, a rewritten record, "
            "or a checkpoint in the old format, whose root is a hash-chain head)"
        ) from exc


def verify_consistency(
    old_data: bytes, new_data: bytes, proof_data: bytes, public_key: Ed25519PublicKey
) -> ConsistencyResult:
    """Verify both signed checkpoints, then the consistency proof between them. Raises
    VerificationError."""
    old = checkpoints.verify(old_data, public_key)
    new = checkpoints.verify(new_data, public_key)
    check_consistency(parse_consistency(proof_data), old, new)
    return ConsistencyResult(old, new)
