"""Stored tree rows and records forged or wiped in the database: an append never builds on a
forged or missing node; a wiped tree is rebuilt from the records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import (
    CANARY,
    NOW_TS,
    Chain,
    _filled,
    _refused,
    _verified,
    append,
    floorctl,
    verify,
)

from floorguard._chain.chain import body_text, record_digest

pytestmark = pytest.mark.fleet


# --- tampered head and tree rows ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "tamper"),
    [
        # ``head`` records, so leaf n = head is next; its left siblings are the nodes the
        # head query prefetches: n = 3 -> (0, 2), (1, 0); n = 5 -> (0, 4);
        # n = 7 -> (0, 6), (1, 2), (2, 0).
        (3, "UPDATE floorguard.tree SET hash = '\\x00' WHERE level = 0 AND idx = 2"),
        (3, "UPDATE floorguard.tree SET hash = hash || '\\x00' WHERE level = 1 AND idx = 0"),
        (5, "UPDATE floorguard.tree SET hash = '\\x' WHERE level = 0 AND idx = 4"),
        (7, "UPDATE floorguard.tree SET hash = '\\x01' WHERE level = 2 AND idx = 0"),
        (7, "DELETE FROM floorguard.tree WHERE level = 1 AND idx = 2"),
    ],
)
def test_a_wrong_length_or_missing_sibling_node_refuses_the_append(
    pg: Chain, head: int, tamper: str
) -> None:
    chain = pg.chain()
    for n in range(head):
        chain.append(CANARY, receipt(n=n))
    pg.sql(f"ALTER TABLE floorguard.tree DISABLE TRIGGER USER; {tamper}")
    _refused(chain)
    assert pg.sql("SELECT count(*) FROM floorguard.records") == str(head)


@pytest.mark.parametrize(
    "tamper",
    [
        "INSERT INTO floorguard.tree VALUES (0, 3, sha256('planted'))",
        "ALTER TABLE floorguard.records DISABLE TRIGGER USER;"
        " DELETE FROM floorguard.records WHERE seq = 2",
    ],
    ids=["a leaf planted", "the head deleted, its nodes kept"],
)
def test_a_proof_of_a_tree_with_more_leaves_than_records_is_refused_in_one_line(
    pg: Chain, tmp_path: Path, tamper: str
) -> None:
    _filled(pg, 3)
    pg.sql(tamper)
    done = floorctl("chain", "prove", "--seq", "1", env=pg.env(tmp_path / "host"))
    assert done.returncode == 1 and done.stdout == "", done
    assert "Traceback" not in done.stderr, done.stderr
    assert "holds 4 leaves but the chain only 3 records" in done.stderr or (
        "holds 3 leaves but the chain only 2 records" in done.stderr
    ), done.stderr


def test_a_deleted_head_leaf_is_rebuilt_from_the_records_not_trusted_from_the_tree(
    pg: Chain,
) -> None:
    chain = pg.chain()
    for n in range(7):
        chain.append(CANARY, receipt(n=n))
    pg.sql("ALTER TABLE floorguard.tree DISABLE TRIGGER USER;"
           " DELETE FROM floorguard.tree WHERE level = 0 AND idx = 6")  # fmt: skip
    chain.append(CANARY, receipt(n=7))
    assert _verified(pg) == 8


@pytest.mark.parametrize(
    "extra",
    [
        "(-1, 0, '\\x00')",
        "(-1, 3, decode(repeat('00', 32), 'hex'))",
        "(62, 0, decode(repeat('00', 32), 'hex'))",
        "(1, 9223372036854775807, decode(repeat('00', 32), 'hex'))",
        "(3, -1, decode(repeat('00', 32), 'hex'))",
    ],
)
def test_extra_tree_rows_outside_the_tree_change_nothing(pg: Chain, extra: str) -> None:
    chain = pg.chain()
    for n in range(4):
        chain.append(CANARY, receipt(n=n))
    pg.sql(f"INSERT INTO floorguard.tree VALUES {extra}")  # noqa: S608
    for n in range(4, 9):
        chain.append(CANARY, receipt(n=n))
    pg.sql(f"DELETE FROM floorguard.tree WHERE (level, idx, hash) = {extra}")  # noqa: S608
    assert _verified(pg) == 9


def test_a_tree_the_owner_wiped_is_rebuilt_through_psycopg_inside_the_libpq_transaction(
    pg: Chain,
) -> None:
    """No head leaf (a chain from before the tree, or a tree the owner wiped): the append falls
    back to _build_tree, whose nodes go out as _INSERT_NODES through the multi-argument
    unnest. That unnest is FROM-clause syntax, not a function (qualified as
    pg_catalog.unnest it does not exist: UndefinedFunction), so the tree must be rebuilt and
    the append succeed, not every such append and AuditChain.ensure_tree be refused."""
    chain = pg.chain()
    for n in range(11):
        chain.append(CANARY, receipt(n=n))
    pg.sql("ALTER TABLE floorguard.tree DISABLE TRIGGER USER; DELETE FROM floorguard.tree")
    for n in range(11, 16):
        chain.append(CANARY, receipt(n=n))
    assert _verified(pg) == 16


def test_ensure_tree_builds_the_tree_of_a_chain_whose_tree_was_wiped(pg: Chain) -> None:
    """AuditChain.ensure_tree goes through the same unnest INSERT (see above)."""
    chain = pg.chain()
    for n in range(5):
        chain.append(CANARY, receipt(n=n))
    pg.sql("ALTER TABLE floorguard.tree DISABLE TRIGGER USER; DELETE FROM floorguard.tree")
    assert chain.ensure_tree() == 5
    assert _verified(pg) == 5


def test_records_and_tree_rows_forged_by_hand_stop_appends_before_they_build_on_them(
    pg: Chain, tmp_path: Path
) -> None:
    env = pg.env(tmp_path)
    assert append(env).returncode == 0
    # An appender may not write a row by hand at all; the owner still may.
    with pytest.raises(RuntimeError, match="permission denied"):
        pg.sql("INSERT INTO floorguard.tree VALUES (0, 1, '\\x00')", as_owner=False)
    # A leaf for the next index, planted ahead of the real append: refused, nothing written.
    pg.sql("INSERT INTO floorguard.tree VALUES (0, 1, '\\x00')")
    done = append(env)
    assert done.returncode == 1 and "cannot append" in done.stderr
    pg.sql("DELETE FROM floorguard.tree WHERE level = 0 AND idx = 1")  # the owner repairs
    # A record with a forged MAC: the next append records it on the host and chains onto
    # it (refusing would let any one host stop every other); the audit names it.
    first = json.loads(pg.sql("SELECT row_to_json(r) FROM floorguard.records r WHERE seq = 0"))
    linked = record_digest(body_text(
        seq=0, ts=first["ts"], chain_id=first["chain_id"], event=first["event"],
        receipt_id=first["receipt_id"], receipt_json=first["receipt"], prev=first["prev"],
    ).encode())  # fmt: skip
    pg.sql(
        # stamped now, as the record check asks, and linked to record 0: only the MAC is
        # forged (a record that does not hold together is never built into the tree)
        f"INSERT INTO floorguard.records SELECT 1, {NOW_TS},"  # noqa: S608
        f" chain_id, event, receipt_id, receipt, '{linked}', repeat('0', 64)"
        " FROM floorguard.records WHERE seq = 0",
    )
    done = append(env)
    assert done.returncode == 0 and "does not verify with the key" in done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "3"
    assert verify(pg).returncode == 1


def test_a_record_inserted_by_hand_with_a_broken_link_is_never_built_into_the_tree(
    pg: Chain, tmp_path: Path
) -> None:
    env = pg.env(tmp_path)
    assert append(env).returncode == 0
    # The owner's own insert, linked to nothing (record 0's prev copied): the append that
    # would build its leaf names it instead, and writes nothing.
    pg.sql(
        f"INSERT INTO floorguard.records SELECT 1, {NOW_TS},"  # noqa: S608
        " chain_id, event, receipt_id, receipt, prev, repeat('0', 64)"
        " FROM floorguard.records WHERE seq = 0",
    )
    done = append(env)
    assert done.returncode == 1
    assert "record 1's prev is not the digest of the record before it" in done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "2"
    assert pg.sql("SELECT count(*) FROM floorguard.tree WHERE level = 0") == "1"


@pytest.mark.parametrize("broken", ["its link", "its receipt"])
def test_no_host_builds_the_leaf_of_a_record_inserted_by_hand_that_is_not_well_formed(
    pg: Chain, tmp_path: Path, broken: str
) -> None:
    """add_tree_nodes (which builds the tree of a chain written before it) refuses the leaf
    of a record that does not link to the one before it or whose receipt is not its
    receipt_id's content: else one host could silence, for every host, the refusal that
    names such a record."""
    import psycopg

    from floorguard._chain.chain_record import _row_body, _row_line
    from floorguard._crypto import merkle

    env = pg.env(tmp_path)
    assert append(env).returncode == 0
    with psycopg.connect(pg.url) as conn:
        first = conn.execute("SELECT * FROM floorguard_api.records(0, 0, 1)").fetchone()
    assert first is not None
    linked = record_digest(_row_body(tuple(first)).encode("utf-8"))
    prev, receipt_id = ("repeat('0', 64)", "receipt_id") if broken == "its link" else (
        f"'{linked}'", "'sha256:' || repeat('ab', 32)")  # fmt: skip
    pg.sql(
        f"INSERT INTO floorguard.records SELECT 1, {NOW_TS}, chain_id, event, {receipt_id},"  # noqa: S608
        f" receipt, {prev}, mac FROM floorguard.records WHERE seq = 0",
    )
    with psycopg.connect(pg.url) as conn:
        row = conn.execute("SELECT * FROM floorguard_api.records(1, 1, 1)").fetchone()
        assert row is not None
        leaf = merkle.leaf_hash(_row_line(tuple(row)).encode("utf-8"))
        with pytest.raises(psycopg.errors.CheckViolation, match="record 1"):
            conn.execute(
                "SELECT floorguard_api.add_tree_nodes(ARRAY[0], ARRAY[1::bigint], ARRAY[%s])",
                (leaf,),
            )
    assert pg.sql("SELECT count(*) FROM floorguard.tree WHERE level = 0") == "1"
    done = append(env)
    assert done.returncode == 1, done.stderr
    assert "record 1" in done.stderr, done.stderr
