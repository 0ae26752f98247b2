"""The RFC 6962 tree against the published Certificate Transparency vectors, and its proofs'
properties over random sizes.

Vectors (leaf inputs, complete-subtree hashes, roots at sizes 1..8, and the published
inclusion and consistency proofs) are from the transparency-dev/merkle repository:
  testonly/constants.go   commit 582a6ad190b6848f1d26f8bf08ddef29955d9db1
  proof/verify_test.go    commit 02194e9afb6c1d95b5381350007963aa70fff472
  testonly/reference_test.go  commit 141d627eab770a7e9a2514f46a8b6338e6d90874
(the same data as google/certificate-transparency's merkle_tree_test.cc). Proofs for every
other (index, size) and (old, new) pair up to 8 are checked against an independent
recursive reading of the RFC written here, and against the published roots.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floorguard._crypto import merkle
from floorguard._crypto.merkle import (
    CompactRange,
    ProofError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root,
    verify_consistency,
    verify_inclusion,
)

h = bytes.fromhex

LEAVES = [
    h(""),
    h("00"),
    h("10"),
    h("2021"),
    h("3031"),
    h("40414243"),
    h("5051525354555657"),
    h("606162636465666768696a6b6c6d6e6f"),
]
NODE_HASHES = [
    [
        h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
        h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
        h("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7"),
        h("07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7"),
        h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        h("4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658"),
        h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
        h("46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"),
    ],
    [
        h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
        h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
        h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
    ],
    [
        h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
    ],
    [h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")],
]
ROOTS = {
    0: h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    1: h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    2: h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    3: h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    4: h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    5: h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    6: h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    7: h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    8: h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
}
# (leaf index, tree size): audit path, as published.
INCLUSION = {
    (0, 1): [],
    (0, 2): [h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7")],
    (1, 2): [h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d")],
    (2, 3): [h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")],
    (1, 5): [
        h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
        h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
    ],
    (0, 8): [
        h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
        h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
    ],
    (5, 8): [
        h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
        h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    ],
}
# (old size, new size): consistency proof, as published.
CONSISTENCY = {
    (1, 1): [],
    (1, 8): [
        h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
        h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
    ],
    (6, 8): [
        h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
        h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
        h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    ],
    (2, 5): [
        h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
    ],
    (6, 7): [
        h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
        h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
        h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    ],
}


# --- an independent reading of RFC 6962 section 2.1, over the leaves themselves -------------


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(data: Sequence[bytes]) -> bytes:
    if not data:
        return hashlib.sha256(b"").digest()
    if len(data) == 1:
        return hashlib.sha256(b"\x00" + data[0]).digest()
    k = _k(len(data))
    return hashlib.sha256(b"\x01" + ref_mth(data[:k]) + ref_mth(data[k:])).digest()


def ref_path(m: int, data: Sequence[bytes]) -> list[bytes]:
    if len(data) <= 1:
        return []
    k = _k(len(data))
    if m < k:
        return [*ref_path(m, data[:k]), ref_mth(data[k:])]
    return [*ref_path(m - k, data[k:]), ref_mth(data[:k])]


def ref_subproof(m: int, data: Sequence[bytes], whole: bool) -> list[bytes]:
    n = len(data)
    if m == n:
        return [] if whole else [ref_mth(data)]
    k = _k(n)
    if m <= k:
        return [*ref_subproof(m, data[:k], whole), ref_mth(data[k:])]
    return [*ref_subproof(m - k, data[k:], False), ref_mth(data[:k])]


class Tree:
    """Every complete subtree of a list of leaves, as a store would keep them."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        self.levels: list[list[bytes]] = [[leaf_hash(leaf) for leaf in leaves]]
        while len(self.levels[-1]) > 1:
            below = self.levels[-1]
            self.levels.append(
                [node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
            )

    def subtree(self, level: int, index: int) -> bytes:
        return self.levels[level][index]


TREE = Tree(LEAVES)


def flip(value: bytes, bit: int) -> bytes:
    bit %= len(value) * 8
    changed = bytearray(value)
    changed[bit // 8] ^= 1 << (bit % 8)
    return bytes(changed)


# --- the published vectors -------------------------------------------------------------------


def test_leaf_and_node_hashes_are_the_published_complete_subtrees() -> None:
    assert TREE.levels == NODE_HASHES


@pytest.mark.parametrize("size", range(9))
def test_root_of_the_first_leaves_is_the_published_root(size: int) -> None:
    assert root(size, TREE.subtree) == ROOTS[size]
    compact = CompactRange()
    for leaf in LEAVES[:size]:
        compact.append(leaf_hash(leaf))
    assert compact.root() == ROOTS[size]


@pytest.mark.parametrize(("index", "size"), sorted(INCLUSION))
def test_inclusion_proof_is_the_published_one(index: int, size: int) -> None:
    assert inclusion_proof(index, size, TREE.subtree) == INCLUSION[index, size]


@pytest.mark.parametrize(("old", "new"), sorted(CONSISTENCY))
def test_consistency_proof_is_the_published_one(old: int, new: int) -> None:
    assert consistency_proof(old, new, TREE.subtree) == CONSISTENCY[old, new]


ALL_INCLUSIONS = [(i, n) for n in range(1, 9) for i in range(n)]
ALL_CONSISTENCIES = [(m, n) for n in range(1, 9) for m in range(1, n + 1)]


@pytest.mark.parametrize(("index", "size"), ALL_INCLUSIONS)
def test_every_inclusion_proof_up_to_eight_leaves_verifies_against_the_published_root(
    index: int, size: int
) -> None:
    proof = inclusion_proof(index, size, TREE.subtree)
    assert proof == ref_path(index, LEAVES[:size])
    verify_inclusion(index, size, leaf_hash(LEAVES[index]), proof, ROOTS[size])
    for other in range(size):
        if other != index:
            with pytest.raises(ProofError):
                verify_inclusion(other, size, leaf_hash(LEAVES[index]), proof, ROOTS[size])


@pytest.mark.parametrize(("old", "new"), ALL_CONSISTENCIES)
def test_every_consistency_proof_up_to_eight_leaves_verifies_against_the_published_roots(
    old: int, new: int
) -> None:
    proof = consistency_proof(old, new, TREE.subtree)
    assert proof == ref_subproof(old, LEAVES[:new], True)
    verify_consistency(old, new, ROOTS[old], ROOTS[new], proof)
    if old != new:
        with pytest.raises(ProofError):
            verify_consistency(old, new, ROOTS[new], ROOTS[old], proof)


def test_refuses_two_roots_for_one_size() -> None:
    with pytest.raises(ProofError, match="fork"):
        verify_consistency(5, 5, ROOTS[5], ROOTS[6], [])


def test_refuses_a_consistency_proof_that_shrinks_the_tree() -> None:
    with pytest.raises(ProofError):
        verify_consistency(6, 5, ROOTS[6], ROOTS[5], CONSISTENCY[2, 5])
    with pytest.raises(ProofError):
        consistency_proof(6, 5, TREE.subtree)


def test_refuses_an_empty_proof_between_different_sizes() -> None:
    with pytest.raises(ProofError):
        verify_consistency(2, 5, ROOTS[2], ROOTS[5], [])


def test_refuses_a_proof_hash_of_the_wrong_length() -> None:
    proof = [*INCLUSION[1, 5][:-1], INCLUSION[1, 5][-1][:31]]
    with pytest.raises(ProofError, match="32-byte"):
        verify_inclusion(1, 5, leaf_hash(LEAVES[1]), proof, ROOTS[5])


def test_refuses_an_index_at_or_beyond_the_size() -> None:
    with pytest.raises(ProofError):
        verify_inclusion(5, 5, leaf_hash(LEAVES[1]), INCLUSION[1, 5], ROOTS[5])


# --- properties over random sizes ------------------------------------------------------------

SIZES = st.integers(min_value=1, max_value=3000)
# Sizes with one of their low 13 bits flipped stay below this.
BIG = 1 << 13
_TREES: dict[int, Tree] = {}


def tree_of(size: int) -> Tree:
    # One big tree serves every size: a prefix's complete subtrees are the big tree's.
    big = _TREES.get(0)
    if big is None:
        big = _TREES[0] = Tree([leaf_of(i) for i in range(BIG)])
    return big


def leaf_of(index: int) -> bytes:
    return index.to_bytes(4, "big")


@settings(max_examples=200)
@given(data=st.data(), size=SIZES)
def test_every_inclusion_proof_verifies_and_any_one_bit_change_fails(
    data: st.DataObject, size: int
) -> None:
    tree = tree_of(size)
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    top = root(size, tree.subtree)
    proof = inclusion_proof(index, size, tree.subtree)
    assert len(proof) <= (size - 1).bit_length()
    leaf = leaf_hash(leaf_of(index))
    verify_inclusion(index, size, leaf, proof, top)
    bit = data.draw(st.integers(min_value=0, max_value=255))
    with pytest.raises(ProofError):
        verify_inclusion(index, size, leaf_hash(flip(leaf_of(index), bit)), proof, top)
    with pytest.raises(ProofError):
        verify_inclusion(index, size, leaf, proof, flip(top, bit))
    if proof:
        at = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        changed = [*proof[:at], flip(proof[at], bit), *proof[at + 1 :]]
        with pytest.raises(ProofError):
            verify_inclusion(index, size, leaf, changed, top)
    # A signed checkpoint binds its size to its root: a changed size comes with that size's
    # root (the root of another size might accept a path of the same shape).
    other = size ^ (1 << data.draw(st.integers(min_value=0, max_value=12)))
    with pytest.raises(ProofError):
        verify_inclusion(index, other, leaf, proof, root(other, tree.subtree))
    index_bit = data.draw(st.integers(min_value=0, max_value=12))
    with pytest.raises(ProofError):
        verify_inclusion(index ^ (1 << index_bit), size, leaf, proof, top)
    other = data.draw(st.integers(min_value=0, max_value=size - 1))
    if other != index:
        with pytest.raises(ProofError):
            verify_inclusion(other, size, leaf, proof, top)
    if proof:
        with pytest.raises(ProofError):
            verify_inclusion(index, size, leaf, proof[:-1], top)


@settings(max_examples=500)
@given(data=st.data(), size=st.integers(min_value=1, max_value=1 << 62))
def test_each_hash_of_an_inclusion_path_folds_whole_subtrees_that_tile_its_leaf_range(
    data: st.DataObject, size: int
) -> None:
    # The path is computed bottom-up from the bits of index and size; the ranges top-down
    # by RFC 9162's split: the two must name the same leaves, at any size a chain reaches.
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    path = merkle.inclusion_path(index, size)
    assert len(path) == len(merkle.inclusion_ranges(index, size))
    for nodes, (start, end) in zip(path, merkle.inclusion_ranges(index, size), strict=True):
        at = start
        for level, node in nodes:
            assert node << level == at  # whole subtrees, in order, with no gap
            at += 1 << level
        assert at == end <= size
        assert [level for level, _ in nodes] == sorted({level for level, _ in nodes}, reverse=True)


@settings(max_examples=200)
@given(data=st.data(), new=SIZES)
def test_every_consistency_proof_verifies_and_any_one_bit_change_fails(
    data: st.DataObject, new: int
) -> None:
    tree = tree_of(new)
    old = data.draw(st.integers(min_value=1, max_value=new))
    old_root, new_root = root(old, tree.subtree), root(new, tree.subtree)
    proof = consistency_proof(old, new, tree.subtree)
    assert len(proof) <= 2 * new.bit_length()
    verify_consistency(old, new, old_root, new_root, proof)
    bit = data.draw(st.integers(min_value=0, max_value=255))
    with pytest.raises(ProofError):
        verify_consistency(old, new, flip(old_root, bit), new_root, proof)
    with pytest.raises(ProofError):
        verify_consistency(old, new, old_root, flip(new_root, bit), proof)
    if proof:
        at = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        changed = [*proof[:at], flip(proof[at], bit), *proof[at + 1 :]]
        with pytest.raises(ProofError):
            verify_consistency(old, new, old_root, new_root, changed)
    size_bit = 1 << data.draw(st.integers(min_value=0, max_value=12))
    changed_old, changed_new = old ^ size_bit, new ^ size_bit
    with pytest.raises(ProofError):
        verify_consistency(changed_old, new, root(changed_old, tree.subtree), new_root, proof)
    with pytest.raises(ProofError):
        verify_consistency(old, changed_new, old_root, root(changed_new, tree.subtree), proof)


@settings(max_examples=50)
@given(size=SIZES)
def test_compact_range_states_the_same_root_and_subtrees_as_the_whole_tree(size: int) -> None:
    tree = tree_of(size)
    compact = CompactRange()
    for index in range(size):
        for level, at, value in compact.append(leaf_hash(leaf_of(index))):
            assert tree.subtree(level, at) == value
    assert compact.root() == root(size, tree.subtree)
    again = CompactRange.of(size, tree.subtree)
    assert again.root() == compact.root()


def test_module_exports_the_empty_root() -> None:
    assert ROOTS[0] == merkle.EMPTY_ROOT


@settings(max_examples=100)
@given(data=st.data(), new=SIZES)
def test_each_consistency_hash_is_the_tree_hash_of_its_range_and_new_ranges_cover_the_appended(
    data: st.DataObject, new: int
) -> None:
    tree = tree_of(new)
    old = data.draw(st.integers(min_value=1, max_value=new))
    ranges = merkle.consistency_ranges(old, new)
    proof = consistency_proof(old, new, tree.subtree)
    leaves = tree.levels[0]
    assert [merkle.hash_of_leaves(leaves[a:b]) for a, b in ranges] == proof
    assert all(b <= old or a >= old for a, b in ranges)
    appended = sorted((a, b) for a, b in ranges if a >= old)
    covered = [i for a, b in appended for i in range(a, b)]
    assert covered == list(range(old, new))


@pytest.mark.parametrize("size", range(1, 9))
def test_hash_of_leaves_is_the_published_root(size: int) -> None:
    assert merkle.hash_of_leaves([leaf_hash(leaf) for leaf in LEAVES[:size]]) == ROOTS[size]
