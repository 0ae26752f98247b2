"""RFC 6962 Merkle trees (RFC 9162 section 2.1): tree hashes, inclusion and consistency proofs.

Pure: no I/O. Proof generation reads the tree through ``subtree``, a function of
``(level, index)`` that returns the hash of the complete subtree over leaves
``[index * 2**level, (index + 1) * 2**level)`` (level 0 is the leaf hashes). A store that
keeps every complete subtree (the audit chain keeps them in SQLite) can then answer any
proof with O(log n) lookups per proof hash, without reading a single leaf.

Verification follows RFC 9162 sections 2.1.3.2 and 2.1.4.2 and needs only hashes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

Subtree = Callable[[int, int], bytes]


class ProofError(ValueError):
    """A proof does not verify, or a request names sizes no proof exists for."""


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data)."""
    return hashlib.sha256(b"\x00" + data).digest()


_NODE_PREFIX = b"\x01"


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def range_nodes(start: int, end: int) -> list[tuple[int, int]]:
    """The complete subtrees ``(level, index)`` whose hashes ``range_hash(start, end)``
    folds, largest first. Raises ProofError for an empty range."""
    if end <= start:
        raise ProofError(f"empty leaf range [{start}, {end})")
    nodes: list[tuple[int, int]] = []
    at = start
    for level in range((end - start).bit_length() - 1, -1, -1):
        if (end - start) >> level & 1:
            nodes.append((level, at >> level))
            at += 1 << level
    return nodes


def range_hash(start: int, end: int, subtree: Subtree) -> bytes:
    """The tree hash of leaves ``[start, end)``, a range a proof can name.

    Such a range starts at a multiple of a power of two at least its length, so it is the
    complete subtrees of its length's binary digits, largest first; RFC 6962 folds them
    from the right. Raises ProofError for an empty range.
    """
    return fold([subtree(level, index) for level, index in range_nodes(start, end)])


def fold(parts: Sequence[bytes]) -> bytes:
    """The tree hash of a range from the hashes of its complete subtrees, largest first
    (``range_nodes``' order): RFC 6962 folds them from the right."""
    result = parts[-1]
    for part in reversed(parts[:-1]):
        result = node_hash(part, result)
    return result


def root(size: int, subtree: Subtree) -> bytes:
    """The Merkle tree hash of the first ``size`` leaves (the empty hash for none)."""
    return EMPTY_ROOT if size == 0 else range_hash(0, size, subtree)


def root_nodes(size: int) -> list[tuple[int, int]]:
    """The complete subtrees ``root(size, ...)`` reads (none for the empty tree)."""
    return [] if size == 0 else range_nodes(0, size)


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf range ``[start, end)`` each hash of ``inclusion_proof(index, size)`` is the
    tree hash of, in the proof's order (from the leaf up). Raises ProofError unless
    0 <= index < size."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    ranges: list[tuple[int, int]] = []
    low, high = 0, size
    while high - low > 1:
        k = _split(high - low)
        if index < low + k:
            ranges.append((low + k, high))
            high = low + k
        else:
            ranges.append((low, low + k))
            low += k
    ranges.reverse()  # found from the root down; the path runs from the leaf up
    return ranges


def inclusion_path(index: int, size: int) -> list[list[tuple[int, int]]]:
    """For each hash of ``inclusion_proof(index, size)``, from the leaf up, the complete
    subtrees it folds (``range_nodes``' order): one each, but for the sibling that runs
    past the tree's last leaf. Raises ProofError unless 0 <= index < size.

    Below level ``inner`` (where leaf ``index`` and the last leaf part) every sibling is a
    complete subtree, the last one (level inner - 1, to the right) perhaps cut by the end
    of the tree; above it the siblings are the complete left subtrees of the set bits of
    ``index >> inner`` (RFC 9162 2.1.3.1, as its verifier reads them)."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    inner = (index ^ (size - 1)).bit_length()
    # Below level inner - 1 the siblings lie in the left half of the node at level inner,
    # which the last leaf is past: whole subtrees.
    path = [[(level, (index >> level) ^ 1)] for level in range(inner - 1)]
    if inner:
        level = inner - 1
        sibling = (index >> level) ^ 1
        start = sibling << level
        path.append(
            [(level, sibling)] if start + (1 << level) <= size else range_nodes(start, size)
        )
    upper, level = index >> inner, inner
    while upper:
        if upper & 1:
            path.append([(level, upper ^ 1)])
        upper >>= 1
        level += 1
    return path


def inclusion_nodes(index: int, size: int) -> list[tuple[int, int]]:
    """Every complete subtree ``inclusion_proof(index, size)`` reads: what a store can
    fetch in one query before the proof is made. Raises ProofError as inclusion_proof."""
    return [node for nodes in inclusion_path(index, size) for node in nodes]


def inclusion_proof(index: int, size: int, subtree: Subtree) -> list[bytes]:
    """The audit path of leaf ``index`` in the tree of ``size`` leaves (RFC 9162 2.1.3.1).

    Raises ProofError unless 0 <= index < size.
    """
    return [fold([subtree(*node) for node in nodes]) for nodes in inclusion_path(index, size)]


def consistency_proof(old_size: int, new_size: int, subtree: Subtree) -> list[bytes]:
    """The consistency proof from ``old_size`` to ``new_size`` (RFC 9162 2.1.4.1).

    Empty when the sizes are equal. Raises ProofError unless 0 < old_size <= new_size.
    """
    return [
        range_hash(start, end, subtree) for start, end in consistency_ranges(old_size, new_size)
    ]


def consistency_nodes(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """Every complete subtree ``consistency_proof(old_size, new_size)`` reads. Raises
    ProofError as consistency_proof."""
    return [
        node
        for start, end in consistency_ranges(old_size, new_size)
        for node in range_nodes(start, end)
    ]


def consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """The leaf range ``[start, end)`` each hash of ``consistency_proof(old_size, new_size)``
    is the tree hash of, in the proof's order. A range lies wholly below ``old_size`` (the
    old tree's part) or wholly at or above it (the records appended since), and the latter
    cover ``[old_size, new_size)`` exactly: with those records in hand, a verifier can check
    that they are what the proof says was appended. Raises ProofError as consistency_proof.
    """
    if not 0 < old_size <= new_size:
        raise ProofError(f"no consistency proof from size {old_size} to size {new_size}")
    ranges: list[tuple[int, int]] = []
    low, high, m, whole = 0, new_size, old_size, True
    while m != high - low:
        k = _split(high - low)
        if m <= k:
            ranges.append((low + k, high))
            high = low + k
        else:
            ranges.append((low, low + k))
            low, m, whole = low + k, m - k, False
    if not whole:
        ranges.append((low, high))
    ranges.reverse()
    return ranges


def hash_of_leaves(leaves: Sequence[bytes]) -> bytes:
    """The tree hash of a run of leaf hashes (RFC 6962 MTH over them)."""
    if not leaves:
        return EMPTY_ROOT
    level = list(leaves)
    # Pairwise from the left, carrying an odd last node up: the same shape as MTH.
    while len(level) > 1:
        paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def _check_hashes(hashes: Iterable[bytes], what: str) -> None:
    for value in hashes:
        if not isinstance(value, bytes) or len(value) != HASH_SIZE:
            raise ProofError(f"{what} holds a value that is not a {HASH_SIZE}-byte hash")


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The root that ``proof`` leads to from leaf hash ``leaf`` (RFC 9162 2.1.3.2).

    Raises ProofError when the proof cannot belong to that index and size.
    """
    _check_hashes([leaf], "the leaf hash")
    _check_hashes(proof, "the inclusion proof")
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is not below the tree size {size}")
    fn, sn, result = index, size - 1, leaf
    sha256 = hashlib.sha256  # (node_hash inlined: a proof's check is mostly these calls)
    for p in proof:
        if sn == 0:
            raise ProofError("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            result = sha256(_NODE_PREFIX + p + result).digest()
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            result = sha256(_NODE_PREFIX + result + p).digest()
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the inclusion proof is shorter than the tree is deep")
    return result


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], expected_root: bytes
) -> None:
    """Check that leaf hash ``leaf`` is leaf ``index`` of the tree ``expected_root`` names.

    Raises ProofError when it is not.
    """
    if root_from_inclusion(index, size, leaf, proof) != expected_root:
        raise ProofError("the inclusion proof does not lead to the tree's root")


def verify_consistency(
    old_size: int,
    new_size: int,
    old_root: bytes,
    new_root: bytes,
    proof: Sequence[bytes],
) -> None:
    """Check that the tree ``new_root`` names extends the tree ``old_root`` names
    (RFC 9162 2.1.4.2). Raises ProofError when it does not."""
    _check_hashes([old_root, new_root], "a root")
    _check_hashes(proof, "the consistency proof")
    if not 0 < old_size <= new_size:
        raise ProofError(f"no tree of size {new_size} can extend one of size {old_size}")
    if old_size == new_size:
        if proof:
            raise ProofError("a consistency proof between equal sizes must be empty")
        if old_root != new_root:
            raise ProofError("two different roots for one tree size (a fork)")
        return
    if not proof:
        raise ProofError("the consistency proof is empty")
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)  # the old tree is a complete subtree of the new one
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("the consistency proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the consistency proof is shorter than the tree is deep")
    if fr != old_root:
        raise ProofError("the consistency proof does not lead to the old tree's root")
    if sr != new_root:
        raise ProofError("the consistency proof does not lead to the new tree's root")


class CompactRange:
    """The right edge of a growing tree: enough to append leaves and state the root.

    Holds one hash per set bit of the size. ``append`` returns the complete subtrees the
    new leaf finished, as ``(level, index, hash)``, leaf first, for a store to keep.
    """

    def __init__(self, size: int = 0, edge: Sequence[bytes] = ()) -> None:
        if len(edge) != size.bit_count():
            raise ProofError(f"a tree of size {size} has {size.bit_count()} edge hashes")
        self.size = size
        self._edge = list(edge)

    @classmethod
    def of(cls, size: int, subtree: Subtree) -> CompactRange:
        """The edge of the tree of ``size`` leaves, read through ``subtree``."""
        edge = []
        at = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                edge.append(subtree(level, at >> level))
                at += 1 << level
        return cls(size, edge)

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        index = self.size
        made = [(0, index, leaf)]
        current, level = leaf, 0
        while index >> level & 1:
            # (node_hash inlined: building a chain's tree is mostly these calls)
            current = hashlib.sha256(_NODE_PREFIX + self._edge.pop() + current).digest()
            level += 1
            made.append((level, index >> level, current))
        self._edge.append(current)
        self.size += 1
        return made

    def hashes(self) -> tuple[bytes, ...]:
        """The edge's hashes, the largest subtree's first: all its root depends on."""
        return tuple(self._edge)

    def root(self) -> bytes:
        if not self._edge:
            return EMPTY_ROOT
        result = self._edge[-1]
        for part in reversed(self._edge[:-1]):
            result = node_hash(part, result)
        return result
