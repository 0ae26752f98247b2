"""A host's role cannot name the chain's tables, so it can lock none of them.

PostgreSQL locks what a statement names when it parses the statement, and checks the
role's privileges only when it runs it: a role that may name a table can hold a lock on it
with no privilege on it at all (a PREPAREd DELETE, a MERGE that does nothing, a temporary
view FOR UPDATE), or queue DDL on it that every later append would wait behind. A host's
role has no USAGE on the tables' schema: each such statement is refused at the name, before
any lock, and appends go on. A host reads and appends through the functions of
``floorguard_api`` only; a read held open there stops neither appends nor ``chain init``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.pg_chain import CANARY, PARSE_TIME_LOCKS, Chain, _verified, floorctl, timed_append

pytestmark = pytest.mark.fleet

TIMEOUT = 5.0  # FLOORGUARD_CHAIN_TIMEOUT's default
MARGIN = 1.5

# Each was, in an outside test, a way for a host to stall every other host's appends.
NAMING_THE_TABLES = {
    **PARSE_TIME_LOCKS,
    "merge-records": (
        "MERGE INTO floorguard.records x USING (SELECT 1) s ON false"
        " WHEN NOT MATCHED THEN DO NOTHING"
    ),
    "merge-tree": (
        "MERGE INTO floorguard.tree x USING (SELECT 1) s ON false WHEN NOT MATCHED THEN DO NOTHING"
    ),
    "rule-on-records": "CREATE RULE r AS ON INSERT TO floorguard.records DO INSTEAD NOTHING",
    "rule-on-tree": "CREATE RULE r AS ON INSERT TO floorguard.tree DO INSTEAD NOTHING",
    "rule-on-meta": "CREATE RULE r AS ON INSERT TO floorguard.meta DO INSTEAD NOTHING",
    "read-records": "SELECT count(*) FROM floorguard.records",
    "read-tree": "SELECT count(*) FROM floorguard.tree",
    "read-meta": "SELECT value FROM floorguard.meta",
    "lock-table": "LOCK TABLE floorguard.tree IN ACCESS SHARE MODE",
    "sequence-by-name": "SELECT pg_catalog.nextval('floorguard.lock_since')",
    "sequence-read": "SELECT * FROM floorguard.lock_holder",
    "regclass": "SELECT 'floorguard.records'::regclass",
}


def _locks_on_the_chain(pg: Chain, pid: int) -> str:
    """The locks session ``pid`` holds or waits for on anything in the tables' schema."""
    return pg.server.psql(
        "SELECT coalesce(string_agg(c.relname || ':' || l.mode, ','), '') FROM pg_locks l"  # noqa: S608
        " JOIN pg_class c ON c.oid = l.relation"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        f" WHERE n.nspname = 'floorguard' AND l.pid = {pid}",
        database=pg.database,
    ).strip()


@pytest.mark.parametrize("statement", list(NAMING_THE_TABLES.values()), ids=list(NAMING_THE_TABLES))
def test_a_statement_naming_a_table_is_refused_before_it_locks_anything(
    pg: Chain, hostile: psycopg.Connection[Any], statement: str
) -> None:
    pg.chain().append(CANARY, receipt())
    hostile.execute("BEGIN")
    *setup, naming = statement.split("; ")
    for part in setup:
        hostile.execute(part)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="schema floorguard"):
        hostile.execute(naming)
    # The transaction is left open (aborted): whatever it had locked, it would still hold.
    pid = int(hostile.info.backend_pid)
    assert _locks_on_the_chain(pg, pid) == ""
    assert timed_append(pg) < TIMEOUT + MARGIN
    hostile.execute("ROLLBACK")
    assert _verified(pg) == 2


def test_vacuum_full_of_a_table_is_refused_before_it_queues(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    # VACUUM runs outside a transaction; a queued ACCESS EXCLUSIVE request on records
    # would hold every append behind it while anyone reads.
    for statement in ("VACUUM FULL floorguard.records", "ANALYZE floorguard.tree"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="schema floorguard"):
            hostile.execute(statement)


def test_a_host_reading_through_every_function_and_sitting_on_it_stops_no_append_nor_init(
    pg: Chain, hostile: psycopg.Connection[Any], tmp_path: Path
) -> None:
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    chain.close()
    hostile.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    for call in (
        "SELECT * FROM floorguard_api.extent()",
        "SELECT * FROM floorguard_api.head()",
        "SELECT * FROM floorguard_api.records(0, 10, 10)",
        "SELECT floorguard_api.first_seq_of('sha256:00')",
        "SELECT * FROM floorguard_api.tree_nodes(ARRAY[0, 1], ARRAY[0, 0]::bigint[])",
        "SELECT * FROM floorguard_api.nodes_ending(0, 3)",
        "SELECT * FROM floorguard_api.stray_node(3)",
        "SELECT floorguard_api.read_meta('format')",
    ):
        hostile.execute(call)
    pid = int(hostile.info.backend_pid)
    # It reads as the owner, in its own snapshot; it holds no more than a read's locks.
    held = {lock.split(":")[1] for lock in _locks_on_the_chain(pg, pid).split(",") if lock}
    assert held == {"AccessShareLock"}
    assert timed_append(pg) < TIMEOUT + MARGIN
    env = isolated_env(tmp_path / "init", FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file))
    done: list[Any] = []
    runner = threading.Thread(
        target=lambda: done.append(
            floorctl("chain", "init", "--url", pg.owner_url, "--grant", pg.appender, env=env)
        )
    )
    runner.start()
    runner.join(TIMEOUT * 3)
    assert done and done[0].returncode == 0, done[0].stderr if done else "chain init hung"
    # Its snapshot still reads the chain as it was when it began.
    row = hostile.execute("SELECT last_seq FROM floorguard_api.extent()").fetchone()
    assert row == (2,)
    hostile.execute("ROLLBACK")
    assert _verified(pg) == 4
