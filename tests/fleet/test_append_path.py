"""An appender of the PostgreSQL chain can do exactly one thing: append the well-formed next
record, through the chain's functions.

- Its role may SELECT the tables and EXECUTE open_append, append_record, append_next and
  add_tree_nodes;
  it may not insert, update or delete a row, nor lock a table beyond ACCESS SHARE (which
  blocks only DDL), nor take a row lock (every strength needs UPDATE).
- append_record refuses a record that is not the next one, whose prev is not the head's
  digest, whose chain_id is not the chain's, whose event is not one of the chain's, whose
  receipt is not a JSON object or not its receipt_id's content, whose mac is neither an
  HMAC nor a host signature, whose ts is out of its window, or whose tree nodes are not
  exactly its leaf and the subtrees it completes: each with its own message.
- open_append returns, with a ``known_size``, the left edge of a tree of that size.
- ``chain init`` run again revokes what earlier inits granted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import CANARY, Chain, _call, _filled, _next, _verified, floorctl

from floorguard._chain.chain_key import load_key
from floorguard.chainstore.interface import Node
from floorguard.chainstore.postgres import PostgresStore
from floorguard.chainstore.postgres_schema import MAX_STAMP_AGE_SECONDS, appender_role
from floorguard.errors import ChainWriteError


@pytest.fixture
def appender(pg: Chain) -> Iterator[psycopg.Connection[Any]]:
    """A session of the appenders' role, as a host's floorguard opens it (READ COMMITTED)."""
    with psycopg.connect(pg.url) as conn:
        yield conn


# --- privileges -------------------------------------------------------------------------------


def test_the_appender_cannot_plant_a_tree_row_that_would_stop_every_host(pg: Chain) -> None:
    _filled(pg, 3)
    with pytest.raises(RuntimeError, match="permission denied"):
        pg.sql("INSERT INTO floorguard.tree VALUES (0, 3, '\\x00')", as_owner=False)
    _filled(pg, 2)  # every host appends on
    assert _verified(pg) == 5


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO floorguard.records SELECT seq + 1, ts, chain_id, event, receipt_id,"
        " receipt, prev, mac FROM floorguard.records ORDER BY seq DESC LIMIT 1",
        "INSERT INTO floorguard.tree VALUES (5, 5, '\\x00')",
        "INSERT INTO floorguard.meta VALUES ('lock_hold_limit', '1')",
        "INSERT INTO floorguard.append_lock VALUES (2)",
        "UPDATE floorguard.tree SET hash = hash",
        "DELETE FROM floorguard.append_lock",
        "TRUNCATE floorguard.tree",
        "SELECT pg_catalog.setval('floorguard.lock_since', 1)",
        "SELECT floorguard.take_lock()",
    ],
)
def test_the_appender_cannot_write_by_hand(pg: Chain, statement: str) -> None:
    _filled(pg, 2)
    with pytest.raises(RuntimeError, match="permission denied"):
        pg.sql(statement, as_owner=False)
    assert _verified(pg) == 2


@pytest.mark.parametrize("table", ["records", "tree", "meta", "append_lock"])
def test_the_appender_can_take_no_lock_that_blocks_an_append(pg: Chain, table: str) -> None:
    refused = [
        *(f"LOCK TABLE floorguard.{table} IN {mode} MODE" for mode in (
            "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE",
            "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE")),
        *(f"SELECT 1 FROM floorguard.{table} FOR {strength}" for strength in (  # noqa: S608
            "UPDATE", "NO KEY UPDATE", "SHARE", "KEY SHARE")),
    ]  # fmt: skip
    _filled(pg, 1)
    for statement in refused:
        with pytest.raises(RuntimeError, match="permission denied"):
            pg.sql(f"BEGIN; {statement}; COMMIT", as_owner=False)


def test_chain_init_again_revokes_what_earlier_inits_granted(pg: Chain) -> None:
    role = appender_role(pg.database)
    pg.sql(
        f'GRANT USAGE ON SCHEMA floorguard TO "{role}";'
        f' GRANT SELECT, INSERT ON floorguard.records, floorguard.tree TO "{role}";'
        f' GRANT SELECT, UPDATE ON floorguard.append_lock TO "{role}";'
        f' GRANT EXECUTE ON FUNCTION floorguard.take_lock() TO "{role}"'
    )
    env = pg.env(pg.key_file.parent)
    done = floorctl("chain", "init", "--url", pg.owner_url, env=env)
    assert done.returncode == 0, done.stderr
    for statement in ("INSERT INTO floorguard.tree VALUES (0, 0, '\\x00')",
                      "BEGIN; SELECT 1 FROM floorguard.append_lock FOR UPDATE; COMMIT",
                      "SELECT floorguard.take_lock()"):  # fmt: skip
        with pytest.raises(RuntimeError, match="permission denied"):
            pg.sql(statement, as_owner=False)
    assert pg.sql(f"SELECT has_schema_privilege('{role}', 'floorguard', 'USAGE')") == "f"


# --- the record's checks ------------------------------------------------------------------------


def _tamper_nodes(nodes: list[Node]) -> list[Node]:
    level, index, _ = nodes[0]
    return [(level, index, bytes(32)), *nodes[1:]]


BAD: dict[str, tuple[dict[str, Any], Callable[[list[Node]], list[Node]] | None, str]] = {
    "not the next seq": ({"seq": 7}, None, "is not the next one"),
    "a seq already taken": ({"seq": 2}, None, "is not the next one"),
    "prev not the head's digest": ({"prev": "sha256:" + "1" * 64}, None,
                                   "not the digest of the head"),
    "another chain_id": ({"chain_id": "0" * 32}, None, "not this chain"),
    "an unknown event": ({"event": "adapter.made_up"}, None, "is not one of the chain's events"),
    "a receipt that is not JSON": ({"receipt": "{\"kind\":"}, None, "syntax for type json"),
    "a receipt that is a JSON array": ({"receipt": "[1]"}, None, "not a JSON object"),
    # 262,200 four-byte characters: under 2^20 characters, over 2^20 bytes
    "a receipt over 1 MiB in bytes": ({"receipt": '{"a":"' + "\U0001f600" * 262200 + '"}'},
                                      None, "at most 1048576 bytes"),
    "a receipt_id not the receipt's digest": ({"receipt_id": "sha256:" + "2" * 64}, None,
                                              "not the digest of its receipt"),
    "a mac of another shape": ({"mac": "A" * 64}, None, "neither an HMAC"),
    "a signature of another shape": ({"mac": "ed25519:" + "a" * 16 + ":" + "b" * 127}, None,
                                     "neither an HMAC"),
    "a ts not in the chain's form": ({"ts": "2026-12-02T00:00:00Z"}, None,
                                     "not a time in the chain's form"),
    "a ts that is no time": ({"ts": "2026-02-30T00:00:00.000000Z"}, None, "out of range"),
    "a ts in the future": ({"ts": "2999-01-01T00:00:00.000000Z"}, None, "not between"),
    "a ts before the head's": ({"ts": "2000-01-01T00:00:00.000000Z"}, None, "not between"),
    "a leaf that is not the record's": ({}, _tamper_nodes, "tree nodes are not its leaf"),
    "no tree nodes": ({}, lambda nodes: [], "tree nodes are not its leaf"),
    "an extra tree node": ({}, lambda nodes: [*nodes, (9, 0, bytes(32))],
                           "tree nodes are not its leaf"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_append_record_refuses_a_malformed_record(
    pg: Chain, appender: psycopg.Connection[Any], case: str
) -> None:
    fields, nodes_of, message = BAD[case]
    _filled(pg, 3)  # seq 3: its leaf completes the subtrees (1, 1) and (2, 0)
    key = load_key(pg.key_file)
    ts = fields.pop("ts", None)
    record, nodes = _next(appender, key, ts=ts, **fields)
    with pytest.raises((psycopg.DataError, psycopg.IntegrityError), match=message):
        _call(appender, record, nodes if nodes_of is None else nodes_of(nodes))
    appender.rollback()
    _filled(pg, 1)
    assert _verified(pg) == 4


def test_append_record_accepts_the_honest_record_and_a_host_signature_form(
    pg: Chain, appender: psycopg.Connection[Any]
) -> None:
    key = load_key(pg.key_file)
    _call(appender, *_next(appender, key))
    appender.commit()
    signed = "ed25519:" + "ab" * 8 + ":" + "cd" * 64  # the form; helper sig checks it
    record, nodes = _next(appender, key, mac=signed)
    _call(appender, record, nodes)
    appender.commit()
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "2"
    assert pg.sql("SELECT mac FROM floorguard.records WHERE seq = 1") == signed


def test_an_append_refuses_a_transaction_that_is_not_read_committed(
    appender: psycopg.Connection[Any],
) -> None:
    appender.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    with pytest.raises(psycopg.errors.InvalidTransactionState, match="READ COMMITTED"):
        appender.execute("SELECT * FROM floorguard_api.open_append(NULL)")


# --- a chain written before the tree ------------------------------------------------------------


def test_a_chain_without_its_tree_gets_it_through_add_tree_nodes_which_checks_each(
    pg: Chain, appender: psycopg.Connection[Any]
) -> None:
    _filled(pg, 5)
    # As a chain from before the tree: the owner alone may delete (the trigger allows it).
    pg.sql("DELETE FROM floorguard.tree")
    forged = "SELECT floorguard_api.add_tree_nodes(ARRAY[0], ARRAY[0::bigint], ARRAY[%s::bytea])"
    with pytest.raises(psycopg.errors.CheckViolation, match="not the hash of its stored record"):
        appender.execute(forged, (bytes(32),))
    appender.rollback()
    with pytest.raises(psycopg.errors.CheckViolation, match="not the hash of its stored"):
        appender.execute(
            "SELECT floorguard_api.add_tree_nodes(ARRAY[1], ARRAY[0::bigint], ARRAY[%s::bytea])",
            (bytes(32),),
        )
    appender.rollback()
    _filled(pg, 1)  # the next append builds the tree, then adds its own leaf
    assert _verified(pg) == 6


# --- known_size -----------------------------------------------------------------------------------


@pytest.mark.parametrize("known_size", [1, 5, 6, 8, 11])
def test_open_append_returns_the_left_edge_of_a_known_size_in_the_same_round_trip(
    pg: Chain, known_size: int
) -> None:
    _filled(pg, 12)
    store = PostgresStore(pg.url, timeout=5)
    edge = [(level, (known_size >> level) - 1) for level in range(8) if known_size >> level & 1]
    stored = {
        (int(level), int(index)): bytes.fromhex(digest)
        for level, index, digest in (
            line.split("|") for line in pg.sql(
                "SELECT level, idx, encode(hash, 'hex') FROM floorguard.tree").splitlines()
        )
    }  # fmt: skip

    def attempt(view: Any) -> list[bytes | None]:
        # No query from here: a node not prefetched would need the connection.
        conn, view._conn = view._conn, None
        try:
            return [view.subtree(level, index) for level, index in edge]
        finally:
            view._conn = conn

    try:
        got = store.write(attempt, "read", known_size=known_size)
    finally:
        store.close()
    assert edge and got == [stored[node] for node in edge]


def test_a_chain_whose_schema_predates_the_append_functions_names_chain_init(pg: Chain) -> None:
    pg.sql("DROP FUNCTION floorguard_api.open_append(bigint)")
    with pytest.raises(ChainWriteError, match="run `floorctl chain init --url URL` again"):
        pg.chain().append(CANARY, receipt())
    env = pg.env(pg.key_file.parent)
    done = floorctl("chain", "init", "--url", pg.owner_url, env=env)
    assert done.returncode == 0, done.stderr
    _filled(pg, 1)
    assert _verified(pg) == 1


@pytest.mark.fleet  # waits out the stamp's age limit
def test_a_record_stamped_with_the_start_of_a_transaction_kept_open_is_refused(
    pg: Chain, appender: psycopg.Connection[Any]
) -> None:
    # A host may keep a transaction open, then take the lock and stamp the time it began:
    # the record would land in a window that had closed. A stamp older than the limit when
    # stored is refused, however old the transaction.
    _filled(pg, 1)
    began = appender.execute(
        """SELECT to_char(transaction_timestamp() AT TIME ZONE 'UTC',"""
        """ 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""
    ).fetchone()
    assert began is not None
    appender.execute(f"SELECT pg_sleep({MAX_STAMP_AGE_SECONDS + 1})")
    record, nodes = _next(appender, load_key(pg.key_file), ts=began[0])
    with pytest.raises(psycopg.IntegrityError, match="not between"):
        _call(appender, record, nodes)
    appender.rollback()
    _filled(pg, 1)
    assert _verified(pg) == 2
