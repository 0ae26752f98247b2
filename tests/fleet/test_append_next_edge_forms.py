"""A hostile host calls ``append_next`` with a right edge of the tree that is not the stored
one, in each form the description in docs/fleet.md might be read to allow: the head's leaf,
then the root of each complete subtree above it, levels rising, no node left out, repeated
or off the edge, each the stored one.

Trees whose size is 2^k (one complete subtree and the head's leaf inside it), 2^k - 1 (the
head's leaf is itself the smallest complete subtree) and in between; stored nodes that are
on the head's audit path but not on the edge; the edge of a smaller tree; nodes repeated,
reordered, relabelled, with hashes a byte longer or shorter; NULLs appended; arrays of
different lengths; a huge array. Each is refused and stores nothing, and an honest host
appends after it; the honest edge of each size is stored (the positive control).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from helpers.hostile_appender import _ahead, _key, _refused, _stored, array, columns
from helpers.pg_chain import Chain, _filled, right_edge

from floorguard.chainstore.interface import Node

# Like the hostile appender's matrix, a fresh database each: run before a release and
# after changing the append functions, not on every landing (the CI's time is bounded).
pytestmark = pytest.mark.slow

Arrays = tuple[Any, Any, Any]
Trick = Callable[[psycopg.Connection[Any], int, list[Node]], Arrays | None]


def _stored_node(conn: psycopg.Connection[Any], level: int, index: int) -> Node | None:
    found = conn.execute(
        "SELECT hash FROM floorguard.tree WHERE level = %s AND idx = %s", (level, index)
    ).fetchone()
    return None if found is None else (level, index, bytes(found[0]))


def _audit_path_up(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays | None:
    """Every stored subtree holding the head's leaf, levels rising: on the head's path,
    complete, stored, but (beyond the leaf and the top) not the edge."""
    nodes = []
    for level in range(size.bit_length()):
        node = _stored_node(conn, level, (size - 1) >> level)
        if node is not None:
            nodes.append(node)
    return None if nodes == edge else columns(nodes)


def _with_leaf_twice(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays:
    return columns([edge[0], *edge])


def _with_the_leaf_at_the_end_again(
    conn: psycopg.Connection[Any], size: int, edge: list[Node]
) -> Arrays:
    return columns([*edge, edge[0]])


def _subtrees_falling(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays | None:
    if len(edge) < 3:
        return None
    return columns([edge[0], *reversed(edge[1:])])


def _previous_leaf(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays | None:
    node = _stored_node(conn, 0, size - 2)
    return None if node is None else columns([node, *edge[1:]])


def _smaller_trees_edge(
    conn: psycopg.Connection[Any], size: int, edge: list[Node]
) -> Arrays | None:
    return None if size < 2 else columns(right_edge(conn, size - 1))


def _top_relabelled_a_level_up(
    conn: psycopg.Connection[Any], size: int, edge: list[Node]
) -> Arrays | None:
    if len(edge) < 2:
        return None
    level, index, digest = edge[-1]
    return columns([*edge[:-1], (level + 1, index, digest)])


def _leaf_relabelled_as_level_one(
    conn: psycopg.Connection[Any], size: int, edge: list[Node]
) -> Arrays:
    _, index, digest = edge[0]
    return columns([(1, index, digest), *edge[1:]])


def _index_past_32_bits(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays:
    level, index, digest = edge[0]
    return columns([(level, index + 2**32, digest), *edge[1:]])


def _hash_a_byte_longer(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays:
    level, index, digest = edge[-1]
    return columns([*edge[:-1], (level, index, digest + b"\0")])


def _hash_a_byte_shorter(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays:
    level, index, digest = edge[-1]
    return columns([*edge[:-1], (level, index, digest[:-1])])


def _a_null_node_appended(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays:
    levels, indices, hashes = (
        [*(n[i] for n in edge), None] for i in range(3)
    )  # three arrays, one NULL more each
    return array(levels), array(indices), array(hashes)


def _a_null_hash_appended(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays:
    return (*columns(edge)[:2], array([*(n[2] for n in edge), None]))


def _an_index_more(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays:
    return (columns(edge)[0], array([*(n[1] for n in edge), 0]), columns(edge)[2])


def _the_records_own_nodes_too(
    conn: psycopg.Connection[Any], size: int, edge: list[Node]
) -> Arrays:
    # the edge and the nodes of the tree one larger, as if the record were already stored
    return columns([*edge, (0, size, bytes(32))])


def _all_arrays_from_zero(conn: psycopg.Connection[Any], size: int, edge: list[Node]) -> Arrays:
    levels, indices, hashes = ([n[i] for n in edge] for i in range(3))
    return array(levels, lower=0), array(indices, lower=0), array(hashes, lower=0)


# What the edge is made of, tried on every size: which nodes, how many, in what order.
SHAPES: dict[str, Trick] = {
    "the stored audit path of the head's leaf": _audit_path_up,
    "the head's leaf twice in front": _with_leaf_twice,
    "the head's leaf again at the end": _with_the_leaf_at_the_end_again,
    "the complete subtrees in falling order": _subtrees_falling,
    "the previous leaf in place of the head's": _previous_leaf,
    "the stored edge of the tree one smaller": _smaller_trees_edge,
    "the top node relabelled a level up": _top_relabelled_a_level_up,
}
# How the arrays are spelled, tried on one tree of 2^3 leaves.
FORMS: dict[str, Trick] = {
    "the head's leaf relabelled as level 1": _leaf_relabelled_as_level_one,
    "the head's index plus 2^32": _index_past_32_bits,
    "the top hash a byte longer": _hash_a_byte_longer,
    "the top hash a byte shorter": _hash_a_byte_shorter,
    "a NULL appended to each array": _a_null_node_appended,
    "a NULL appended to the hashes only": _a_null_hash_appended,
    "one index more than levels and hashes": _an_index_more,
    "the next leaf's slot appended": _the_records_own_nodes_too,
    "all three arrays starting at subscript 0": _all_arrays_from_zero,
}
TRICKS = {**SHAPES, **FORMS}

SIZES = [1, 3, 4, 7, 8, 16]  # 2^k - 1 and 2^k, and 1 (a leaf that is the whole tree)


def _edge_call(key: bytes, trick: Trick) -> Callable[[psycopg.Connection[Any]], None]:
    def call(conn: psycopg.Connection[Any]) -> None:
        def edge_arrays(edge: list[Node], nodes: list[Node]) -> Arrays:
            sent = trick(conn, edge[0][1] + 1, edge)
            assert sent is not None
            return sent

        _ahead(key, edge_arrays)(conn)

    return call


def _applies(trick: str, size: int) -> bool:
    """Whether ``trick`` makes a form other than the honest edge on a tree of ``size``
    (known from the positions alone)."""
    edge_length = 1 + sum(1 for level in range(1, size.bit_length()) if size >> level & 1)
    path_length = sum(
        1 for level in range(size.bit_length()) if (((size - 1) >> level) + 1) << level <= size
    )
    return {
        "the complete subtrees in falling order": edge_length >= 3,
        "the previous leaf in place of the head's": size >= 2,
        "the stored edge of the tree one smaller": size >= 2,
        "the top node relabelled a level up": edge_length >= 2,
        "the stored audit path of the head's leaf": path_length > edge_length,
    }.get(trick, True)


CASES = [(size, trick) for size in SIZES for trick in SHAPES if _applies(trick, size)] + [
    (8, trick) for trick in FORMS
]


@pytest.mark.parametrize("size", SIZES)
def test_the_honest_edge_of_each_tree_size_is_stored(pg: Chain, size: int) -> None:
    _filled(pg, size)
    _stored(pg, _edge_call(_key(pg), lambda conn, size, edge: columns(edge)))


@pytest.mark.parametrize(("size", "trick"), CASES, ids=[f"{s}-{t}" for s, t in CASES])
def test_append_next_refuses_an_edge_form_that_is_not_the_stored_one(
    pg: Chain, size: int, trick: str
) -> None:
    _filled(pg, size)
    _refused(pg, _edge_call(_key(pg), TRICKS[trick]))


def test_append_next_refuses_the_edge_repeated_fifty_thousand_times_in_bounded_time(
    pg: Chain,
) -> None:
    _filled(pg, 8)
    started = time.monotonic()
    _refused(pg, _edge_call(_key(pg), lambda conn, size, edge: columns(edge * 50_000)))
    assert time.monotonic() - started < 30
