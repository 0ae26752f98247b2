"""The chain's own functions decide with the real catalogs, whatever a session shadows.

A session may create temporary tables (every role may, by default) named as the catalogs,
and PostgreSQL searches its temporary schema first unless a function's search path lists it
last. Every function of the chain pins ``search_path = pg_catalog, pg_temp`` and names the
catalogs it reads by schema, so a shadow in the caller's session changes none of its
decisions: the append-only trigger still refuses a non-owner's DELETE, and the append
functions end only real holders of the chain's lock.
"""

from __future__ import annotations

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import CANARY, Chain


def _appender(pg: Chain) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(pg.url, autocommit=True)


def _functions(pg: Chain) -> dict[str, list[str]]:
    """Each function in the chain's schema: its settings (proconfig)."""
    rows = pg.sql(
        "SELECT p.proname || '=' || coalesce(array_to_string(p.proconfig, ';'), '')"
        " FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = 'floorguard'"
    )
    found: dict[str, list[str]] = {}
    for line in rows.splitlines():
        name, _, config = line.partition("=")
        found[name] = config.split(";") if config else []
    return found


def test_every_function_of_the_chain_pins_its_search_path_with_pg_temp_last(pg: Chain) -> None:
    functions = _functions(pg)
    assert {"refuse_change", "check_record"} <= set(functions)
    for name, config in functions.items():
        assert "search_path=pg_catalog, pg_temp" in config, (name, config)


def test_a_role_granted_delete_cannot_shadow_pg_class_to_pass_for_the_owner(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(4):
        chain.append(CANARY, receipt(n=n))
    # (A host may not even name the table: this is an owner's grant by mistake.)
    pg.sql(
        f"GRANT USAGE ON SCHEMA floorguard TO {pg.appender};"
        f" GRANT SELECT, DELETE, UPDATE, TRUNCATE ON floorguard.records TO {pg.appender}"
    )
    with _appender(pg) as conn:
        conn.execute("CREATE TEMP TABLE pg_class (oid oid, relowner oid)")
        conn.execute(
            "INSERT INTO pg_temp.pg_class SELECT 'floorguard.records'::regclass, r.oid"
            " FROM pg_catalog.pg_roles r WHERE r.rolname = current_user"
        )
        for statement in (
            "DELETE FROM floorguard.records WHERE seq = 2",
            "UPDATE floorguard.records SET ts = ts WHERE seq = 2",
            "TRUNCATE floorguard.records",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                conn.execute(statement)
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "4"


# Each catalog relation (and a few type names) the chain's functions read, as a temporary
# table holding what would change their decision if it were read: the chain's lock held by
# a bystander, everyone a superuser (never ended), another database, another owner.
SHADOWS = {
    "pg_locks": (
        "CREATE TEMP TABLE pg_locks (locktype text, granted boolean, mode text, relation oid,"
        " database oid, pid integer)",
        "INSERT INTO pg_temp.pg_locks SELECT 'relation', true, 'ExclusiveLock',"
        " (SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
        "  ON n.oid = c.relnamespace WHERE n.nspname = 'floorguard'"
        "  AND c.relname = 'append_lock'), d.oid, {bystander} FROM pg_catalog.pg_database d",
    ),
    "pg_roles": (
        "CREATE TEMP TABLE pg_roles (oid oid, rolname name, rolsuper boolean)",
        "INSERT INTO pg_temp.pg_roles SELECT r.oid, current_user, true FROM pg_catalog.pg_roles r",
    ),
    "pg_database": (
        "CREATE TEMP TABLE pg_database (oid oid, datname name)",
        "INSERT INTO pg_temp.pg_database VALUES (0, current_database())",
    ),
    "pg_class": (
        "CREATE TEMP TABLE pg_class (oid oid, relowner oid)",
        "INSERT INTO pg_temp.pg_class SELECT c.oid, r.oid FROM pg_catalog.pg_class c,"
        " pg_catalog.pg_roles r WHERE r.rolname = current_user",
    ),
    "pg_stat_activity": (
        "CREATE TEMP TABLE pg_stat_activity (pid integer, usesysid oid, xact_start timestamptz)",
        "INSERT INTO pg_temp.pg_stat_activity VALUES ({bystander}, 10, '-infinity')",
    ),
    "type names": (
        "CREATE TEMP TABLE text (x integer); CREATE TEMP TABLE bytea (x integer);"
        " CREATE TEMP TABLE timestamptz (x integer); CREATE TEMP TABLE oid (x integer)",
        "SELECT 1",
    ),
}


@pytest.mark.parametrize("shadowed", list(SHADOWS))
def test_a_shadowed_catalog_changes_nothing_when_a_waiting_append_ends_a_holder(
    pg: Chain, shadowed: str
) -> None:
    """A bystander (an idle appender session) survives; the real holder, past its limit,
    is ended; the session that shadows gets the lock."""
    create, fill = SHADOWS[shadowed]
    pg.chain().append(CANARY, receipt())
    with _appender(pg) as bystander, _appender(pg) as holder, _appender(pg) as caller:
        holder.execute("SET idle_in_transaction_session_timeout = 0")
        holder.execute("BEGIN")
        holder.execute("SELECT floorguard_api.open_append(NULL)")
        for statement in (create, fill.format(bystander=bystander.info.backend_pid)):
            caller.execute(statement)  # type: ignore[arg-type]
        caller.execute("SET lock_timeout = '4s'")
        caller.execute("BEGIN")
        row = caller.execute("SELECT seq FROM floorguard_api.open_append(NULL)").fetchone()
        assert row == (0,)
        caller.execute("ROLLBACK")
        assert bystander.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError):
            holder.execute("SELECT 1")
    pg.chain().append(CANARY, receipt())
