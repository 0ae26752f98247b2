"""The chain's lock: a role that is not an appender can neither take it nor lock the chain's
tables to stop appends or chain init; appenders queued on it all succeed whatever the
database's default isolation level."""

from __future__ import annotations

import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.pg_chain import (
    APPEND_SCRIPT,
    CANARY,
    Chain,
    _bounded,
    append,
    floorctl,
    verify,
)

from floorguard.chainstore.postgres_schema import LOCK_KEY, LOCK_STATEMENT

pytestmark = pytest.mark.fleet

# --- the chain's lock --------------------------------------------------------------------------


def test_a_role_with_no_privilege_on_the_chain_cannot_stop_every_append(
    pg: Chain, tmp_path: Path
) -> None:
    """A holder of the chain's lock holds it for at most the timeout and the others go on
    (README). The lock is floorguard.append_lock's row lock, taken only inside the chain's
    functions: an advisory lock on a public constant would be any connecting role's (PUBLIC
    has CONNECT) to take at session level, refusing every append of the fleet."""
    nobody = f"nobody_{secrets.token_hex(3)}"
    pg.server.psql(f"CREATE ROLE {nobody} LOGIN")
    env = pg.env(tmp_path / "h", FLOORGUARD_CHAIN_TIMEOUT="1")
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(pg.server.url(nobody, pg.database), autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))  # what it could take
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(LOCK_STATEMENT)  # and the chain's own lock, which it cannot
            holding.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        time.sleep(3)  # three times the timeout: a frozen appender would have lost it by now
        done = append(env)
    finally:
        release.set()
        holder.join()
    assert done.returncode == 0, done.stderr


# --- the chain's lock --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "LOCK TABLE floorguard.append_lock IN ACCESS EXCLUSIVE MODE",
        "LOCK TABLE floorguard.append_lock IN ACCESS SHARE MODE",
        "SELECT id FROM floorguard.append_lock FOR KEY SHARE",
        "LOCK TABLE floorguard.records IN SHARE MODE",
    ],
)
def test_a_role_that_is_not_an_appender_cannot_take_a_lock_on_the_chain(
    pg: Chain, statement: str
) -> None:
    """A login role that is no member of the appenders' role (PUBLIC has CONNECT) cannot take
    a lock that conflicts with the append's."""
    nobody = f"nobody_{secrets.token_hex(3)}"
    pg.server.psql(f"CREATE ROLE {nobody} LOGIN")
    with (
        psycopg.connect(pg.server.url(nobody, pg.database)) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(statement)


def test_a_role_that_is_not_an_appender_cannot_lock_the_chains_tables_by_oid(
    pg: Chain,
) -> None:
    """A role with no privilege may still call functions that open a relation by oid (the
    oids are in pg_class, readable by all); if one of them takes a lock that conflicts with
    the append's FOR UPDATE or INSERT and is held in an open transaction, every append of
    the fleet waits. Appends must still succeed while such a session stays open."""
    nobody = f"nobody_{secrets.token_hex(3)}"
    pg.server.psql(f"CREATE ROLE {nobody} LOGIN")
    with psycopg.connect(pg.server.url(nobody, pg.database)) as conn:
        oids = [row[0] for row in conn.execute(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'floorguard'").fetchall()]  # fmt: skip
        for oid in oids:
            for probe in ("pg_relation_size(%s)", "pg_total_relation_size(%s)",
                          "pg_table_size(%s)", "pg_indexes_size(%s)"):  # fmt: skip
                try:
                    conn.execute(f"SELECT {probe}", (oid,))
                except psycopg.Error:
                    conn.rollback()
        chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
        try:
            _bounded(lambda: chain.append(CANARY, receipt(n=0)))
        finally:
            chain.close()


def test_a_role_with_no_privilege_cannot_stop_chain_init(pg: Chain) -> None:
    """README "only a role granted the chain can take it (an advisory lock would be any
    connecting role's to hold, stopping the fleet)": a re-init takes the row lock, not an
    advisory one. A role granted nothing holds the advisory lock key (pg_advisory_lock is
    every connecting role's): the owner's `chain init --grant` (adding a host) must still
    succeed, not fail after the timeout ("the chain's lock was not free")."""
    nobody = f"nobody_{secrets.token_hex(3)}"
    host = f"new_{secrets.token_hex(3)}"
    pg.server.psql(f"CREATE ROLE {nobody} LOGIN; CREATE ROLE {host} LOGIN")
    with psycopg.connect(pg.server.url(nobody, pg.database), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        env = isolated_env(pg.key_file.parent / "init", FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file),
                           FLOORGUARD_CHAIN_TIMEOUT="2")  # fmt: skip
        res = floorctl("chain", "init", "--url", pg.owner_url, "--grant", host, env=env)
    assert res.returncode == 0, f"init stopped by a role with no privilege: {res.stderr}"


def _waiting_for_lock(superuser_url: str) -> int:
    # A superuser's view: pg_stat_activity hides other roles' wait events from the owner.
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return 0 if row is None else int(row[0])


@pytest.mark.parametrize("level", ["repeatable read", "serializable"])
def test_appenders_queued_on_the_lock_all_succeed_when_the_database_defaults_to(
    pg: Chain, level: str, tmp_path: Path
) -> None:
    pg.sql(f"ALTER DATABASE {pg.database} SET default_transaction_isolation = '{level}'")
    env = pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT="30")
    assert append(env).returncode == 0
    # Three hosts (the appenders of one host take turns on its own lock before the chain's).
    hosts = [pg.env(tmp_path / f"host{n}", FLOORGUARD_CHAIN_TIMEOUT="30") for n in range(3)]
    with psycopg.connect(pg.owner_url) as holder:
        holder.execute(LOCK_STATEMENT)
        waiting = [
            subprocess.Popen(
                [sys.executable, "-c", APPEND_SCRIPT],
                env=host,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for host in hosts
        ]
        deadline = time.monotonic() + 30
        while (
            _waiting_for_lock(pg.server.url(database=pg.database)) < 3
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        holder.rollback()
    outcomes = [(p.wait(timeout=60), p.communicate()[1]) for p in waiting]
    assert [code for code, _ in outcomes] == [0, 0, 0], outcomes
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "4"
    assert verify(pg).returncode == 0
