"""``floorctl chain init``: over a schema another role made, twice at once, again while hosts
append, with databases and roles of unusual names; it never leaves a login appender role."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pgserver
import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.pg_chain import (
    CANARY,
    Chain,
    _appending,
    _verified,
    append,
    floorctl,
)

from floorguard.chainstore.postgres_schema import APPENDER_ROLE, appender_role

pytestmark = pytest.mark.fleet


def _init_again(
    pg: Chain, *grants: str, home: str = "init", timeout: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The owner's ``chain init`` of ``pg`` run again (from its own home, with the fleet's
    key), granting the appenders' role to ``grants``."""
    extra = {} if timeout is None else {"FLOORGUARD_CHAIN_TIMEOUT": timeout}
    env = isolated_env(pg.key_file.parent / home, FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file),
                       **extra)  # fmt: skip
    flags = [flag for role in grants for flag in ("--grant", role)]
    return floorctl("chain", "init", "--url", pg.owner_url, *flags, env=env)


# --- chain init over a schema someone else made ----------------------------------------------


def test_chain_init_as_superuser_refuses_a_schema_another_role_made_first(pg: Chain) -> None:
    # A role that may create schemas makes floorguard's tables first, without the triggers:
    # it owns them, so it could rewrite every record the fleet appends.
    squatter = f"squat_{pg.database}"
    database = f"{pg.database}_b"
    pg.server.psql(f"CREATE ROLE {squatter} LOGIN")
    pg.server.psql(f"CREATE DATABASE {database} OWNER {squatter}")
    pg.server.psql(
        "CREATE SCHEMA floorguard;"
        " CREATE TABLE floorguard.meta (key text PRIMARY KEY, value text NOT NULL);"
        " CREATE TABLE floorguard.records (seq bigint PRIMARY KEY, ts text NOT NULL,"
        " chain_id text NOT NULL, event text NOT NULL, receipt_id text NOT NULL,"
        " receipt text NOT NULL, prev text NOT NULL, mac text NOT NULL);"
        " CREATE TABLE floorguard.tree (level integer NOT NULL, idx bigint NOT NULL,"
        " hash bytea NOT NULL, PRIMARY KEY (level, idx))",
        user=squatter,
        database=database,
    )
    env = isolated_env(pg.key_file.parent, FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file))
    done = floorctl("chain", "init", "--url", pg.server.url("postgres", database), env=env)
    assert done.returncode == 1, done.stdout
    assert squatter in done.stderr and "owned by" in done.stderr


def test_two_chain_inits_at_once_both_succeed_with_one_chain_and_one_key(
    server: object, tmp_path: Path
) -> None:
    assert isinstance(server, pgserver.PgServer)
    database = f"twice_{os.getpid()}_{time.monotonic_ns() % 10**6}"
    server.psql(f"CREATE DATABASE {database}")
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "fleet.key"))
    argv = [sys.executable, "-m", "floorctl", "chain", "init", "--url",
            server.url("postgres", database)]  # fmt: skip
    runs = [subprocess.Popen(argv, env=env, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for _ in range(2)]  # fmt: skip
    outcomes = [(run.wait(timeout=60), run.communicate()[1]) for run in runs]
    assert [code for code, _ in outcomes] == [0, 0], outcomes
    meta = server.psql("SELECT string_agg(key, ',' ORDER BY key) FROM floorguard.meta",
                       database=database)  # fmt: skip
    assert meta == "chain_id,format,key_check,lock_hold_limit_ms"


# --- the append-only rules and the roles ---------------------------------------------------


def test_chain_init_never_leaves_a_login_appender_role(server: object, tmp_path: Path) -> None:
    """Chain init makes the NOLOGIN role floorguard_appender_DATABASE (README); a role of that
    name made beforehand with LOGIN and a password (by anyone with CREATEROLE) is refused,
    never reused as it is and given SELECT and INSERT on the chain."""
    assert isinstance(server, pgserver.PgServer)
    database = f"pre_{time.monotonic_ns() % 10**9}"
    role = appender_role(database)
    server.psql(f"CREATE DATABASE {database}")
    server.psql(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'known-to-the-intruder'")
    try:
        env = isolated_env(tmp_path, FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "fleet.key"))
        done = floorctl("chain", "init", "--url", server.url("postgres", database), env=env)
        can_login = server.psql(f"SELECT rolcanlogin FROM pg_roles WHERE rolname = '{role}'")  # noqa: S608
        assert done.returncode != 0 or can_login == "f", (done.stdout, can_login)
        assert f"the role {role} exists and can log in" in done.stderr
    finally:
        server.psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        server.psql(f'DROP ROLE IF EXISTS "{role}"')


def test_chain_init_by_a_role_that_cannot_create_in_the_database_says_what_it_needs(
    server: object, tmp_path: Path
) -> None:
    # The database a superuser made, the owner role not its owner: the privilege missing is
    # the role's running init (CREATE on the database), not an appender's.
    assert isinstance(server, pgserver.PgServer)
    tag = time.monotonic_ns() % 10**9
    database, owner = f"noc_{tag}", f"noc_owner_{tag}"
    server.psql(f"CREATE DATABASE {database}")
    server.psql(f"CREATE ROLE {owner} LOGIN CREATEROLE")
    try:
        env = isolated_env(tmp_path, FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "fleet.key"))
        done = floorctl("chain", "init", "--url", server.url(owner, database), env=env)
        assert done.returncode != 0, done.stdout
        assert "permission denied" in done.stderr and "CREATE ON DATABASE" in done.stderr, done
        assert "appender" not in done.stderr, done.stderr
        # The key it made is kept (and said to be this run's, not one found here)
        assert f"chain key {tmp_path / 'fleet.key'} was created by this run" in done.stderr
        assert (tmp_path / "fleet.key").exists()
    finally:
        server.psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        server.psql(f"DROP ROLE IF EXISTS {owner}")


# --- one appender role per database ------------------------------------------------------------


def test_a_database_named_after_the_digest_of_a_long_name_shares_that_chains_appender_role(
    pg: Chain, tmp_path: Path
) -> None:
    """Each database gets its own appender role, so a host of one chain cannot append to
    another chain in the cluster (README). A long database name is hashed to
    floorguard_appender-<hex>, a form no database name gives: a database named after the
    digest of a long name must not share that chain's role through `chain init`."""
    tag = secrets.token_hex(3)
    long_db = f"chain_long_{tag}_" + "x" * 40  # > 43 bytes: its role name is hashed
    role = appender_role(long_db)
    short_db = role[len(APPENDER_ROLE) + 1 :]  # a database named like that digest
    assert appender_role(short_db) != role  # no collision
    owner_a, owner_b, host_b = f"own_a_{tag}", f"own_b_{tag}", f"host_b_{tag}"
    pg.server.psql(f"CREATE ROLE {owner_a} LOGIN CREATEROLE; CREATE ROLE {owner_b} LOGIN "
                   f"CREATEROLE; CREATE ROLE {host_b} LOGIN")  # fmt: skip
    pg.server.psql(f'CREATE DATABASE "{long_db}" OWNER {owner_a}')
    pg.server.psql(f'CREATE DATABASE "{short_db}" OWNER {owner_b}')
    try:
        env_a = isolated_env(tmp_path / "a", FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "a.key"))
        done = floorctl("chain", "init", "--url", pg.server.url(owner_a, long_db), env=env_a)
        assert done.returncode == 0, done.stderr
        env_b = isolated_env(tmp_path / "b", FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "b.key"))
        done = floorctl("chain", "init", "--url", pg.server.url(owner_b, short_db),
                        "--grant", host_b, env=env_b)  # fmt: skip
        assert done.returncode == 0, done.stderr
        # Chain B's host, granted only chain B's appender role, against chain A:
        with pytest.raises(RuntimeError, match="permission denied"):
            pg.server.psql("INSERT INTO floorguard.tree VALUES (40, 0, '\\x00')",
                           user=host_b, database=long_db)  # fmt: skip
    finally:
        for db in (long_db, short_db):
            with contextlib.suppress(Exception):
                pg.server.psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


# --- roles with unusual names ------------------------------------------------------------------


def test_a_login_role_with_quotes_and_capitals_is_granted_and_appends(
    pg: Chain, tmp_path: Path
) -> None:
    """--grant takes the role's exact name (quoted as an identifier, no SQL built from it): a
    role named Host "17"; DROP is granted, appends, and nothing else ran."""
    tag = secrets.token_hex(3)  # (the server outlives one run: a role name used once)
    name = f'Host "{tag}"; DROP'
    pg.server.psql(f'CREATE ROLE "Host ""{tag}""; DROP" LOGIN')
    env = isolated_env(pg.key_file.parent, FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file))
    done = floorctl("chain", "init", "--url", pg.owner_url, "--grant", name, env=env)
    assert done.returncode == 0, done.stderr
    url = pg.server.url(f"Host%20%22{tag}%22%3B%20DROP", pg.database)
    env = {**pg.env(tmp_path / "h"), "FLOORGUARD_CHAIN_URL": url}
    done = append(env)
    assert done.returncode == 0, done.stderr


def test_chain_init_run_again_while_hosts_append_refuses_no_append(pg: Chain) -> None:
    """README "chain init ... creates, idempotently" / "--grant gives it to existing login
    roles" and "a decision is returned only after COMMIT": the owner re-running `chain init
    --grant NEW_HOST` while three appenders run must succeed each time, and no spawn may be
    refused. init takes the appenders' row lock before any DDL: its DDL takes SHARE ROW
    EXCLUSIVE on records, then tree, then append_lock, while an append holds the row lock and
    takes ROW EXCLUSIVE on the tables of its INSERT, so a lock-order inversion would be a
    deadlock the server resolves by aborting one (a refused spawn or init, "deadlock
    detected")."""
    stop = threading.Event()
    errors: list[str] = []
    done: list[int] = []
    workers = [_appending(pg, stop, errors, done, f"h{i}") for i in range(3)]
    inits: list[str] = []
    try:
        time.sleep(0.5)
        for i in range(8):
            host = f"late_{secrets.token_hex(3)}"
            pg.server.psql(f"CREATE ROLE {host} LOGIN")
            res = _init_again(pg, host, home=f"init{i}")
            if res.returncode != 0:
                inits.append(res.stderr.strip())
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)
    assert done, "no append went through"
    assert not errors, f"{len(errors)} appends refused during chain init: {errors[:2]}"
    assert not inits, f"chain init refused while hosts append: {inits[:2]}"
    assert _verified(pg) == len(done)


def test_an_append_waiting_behind_a_pending_init_is_not_refused(pg: Chain) -> None:
    """A non-appender cannot block init's SHARE ROW EXCLUSIVE directly, but the owner's own
    long read (e.g. `chain export` of a big chain piped to a slow consumer) holds ACCESS
    SHARE only, which init does not conflict with: init during an open owner read must
    neither wait nor make appends wait beyond the timeout."""
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    try:
        chain.append(CANARY, receipt(n=0))
        with psycopg.connect(pg.owner_url) as reader:
            reader.execute("BEGIN; SELECT count(*) FROM floorguard.records")
            res = _init_again(pg, timeout="2")
            assert res.returncode == 0, res.stderr
            chain.append(CANARY, receipt(n=1))
    finally:
        chain.close()
    assert _verified(pg) == 2


def test_chain_init_run_again_ends_a_host_holding_the_chains_lock_past_the_limit(
    pg: Chain,
) -> None:
    """chain init takes the chain's lock as an append does: a host's session sitting on it
    with its own timeouts off is ended once it has held it longer than the hold limit, and
    init goes on within its timeout instead of failing behind it."""
    pg.chain().append(CANARY, receipt())
    with psycopg.connect(pg.url, autocommit=True) as holder:
        holder.execute("SET idle_in_transaction_session_timeout = 0")
        holder.execute("BEGIN")
        holder.execute("SELECT floorguard_api.open_append(NULL)")
        pid = holder.info.backend_pid
        started = time.monotonic()
        res = _init_again(pg, timeout="3")
        took = time.monotonic() - started
        assert res.returncode == 0, res.stderr
        assert took < 6, took
        with pytest.raises(psycopg.OperationalError):
            holder.execute("SELECT 1")
    assert pg.sql(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}") == "0"  # noqa: S608
    pg.chain().append(CANARY, receipt())
    assert _verified(pg) == 2


# A GRANT that grants nothing (the host holds no grant option) still rewrites the object's
# catalog row, which stays locked to the host's transaction's end; chain init must change
# that row. Each was, in an outside test, a way to keep every re-init (and the upgrade)
# from ever finishing, the chain's lock held by init meanwhile.
NO_OP_GRANTS = {
    "function": "GRANT EXECUTE ON FUNCTION floorguard_api.open_append(bigint) TO CURRENT_USER",
    "schema": "GRANT USAGE ON SCHEMA floorguard_api TO CURRENT_USER",
}


@pytest.mark.parametrize("grant", list(NO_OP_GRANTS.values()), ids=list(NO_OP_GRANTS))
def test_chain_init_ends_a_host_holding_a_catalog_row_it_must_change(
    pg: Chain, hostile: psycopg.Connection[Any], grant: str
) -> None:
    pg.chain().append(CANARY, receipt())
    hostile.execute("BEGIN")
    hostile.execute(grant)
    res = _init_again(pg, timeout="3")
    assert res.returncode == 0, res.stderr
    assert f"ended session {hostile.info.backend_pid} ({pg.appender})" in res.stdout
    with pytest.raises(psycopg.OperationalError):
        hostile.execute("SELECT 1")
    pg.chain().append(CANARY, receipt())
    assert _verified(pg) == 2


def test_the_upgrade_goes_through_a_hosts_temporary_view_on_an_old_function(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    # The layout before floorguard_api: hosts had USAGE on floorguard and EXECUTE on the
    # functions there. A host's temporary view calling one keeps DROP FUNCTION from
    # dropping it; the upgrade must still take every one of those privileges away.
    role = appender_role(pg.database)
    pg.sql(
        "CREATE FUNCTION floorguard.open_append(known_size bigint) RETURNS integer"
        " LANGUAGE sql SECURITY DEFINER AS 'SELECT 1';"
        f' GRANT USAGE ON SCHEMA floorguard TO "{role}";'
        f' GRANT EXECUTE ON FUNCTION floorguard.open_append(bigint) TO "{role}"'
    )
    hostile.execute("CREATE TEMP VIEW old AS SELECT floorguard.open_append(NULL) AS x")
    assert hostile.execute("SELECT x FROM old").fetchone() == (1,)
    res = _init_again(pg, timeout="3")
    assert res.returncode == 0, res.stderr
    assert pg.sql(f"SELECT has_schema_privilege('{role}', 'floorguard', 'USAGE')") == "f"
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        hostile.execute("SELECT x FROM old")
    pg.chain().append(CANARY, receipt())
    assert _verified(pg) == 1


def test_chain_init_does_not_end_the_owners_own_session_and_says_what_it_waited_for(
    pg: Chain,
) -> None:
    with psycopg.connect(pg.owner_url, autocommit=True) as owner:
        owner.execute("BEGIN")
        owner.execute("GRANT USAGE ON SCHEMA floorguard_api TO CURRENT_USER")
        res = _init_again(pg, timeout="2")
        assert res.returncode == 1
        assert "a session held what chain init waits for" in res.stderr, res.stderr
        # named, with the one reason that applies to it
        pid = owner.info.backend_pid
        assert f"session {pid} ({pg.owner}: the owner's own, which init does not end)" in (
            res.stderr
        ), res.stderr
        assert "a superuser's" not in res.stderr and "pg_signal_backend" not in res.stderr
        assert owner.execute("SELECT 1").fetchone() == (1,)  # not ended
        owner.execute("ROLLBACK")


def test_chain_init_names_a_host_session_it_could_not_end_and_what_to_grant(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    pg.server.psql(f"REVOKE pg_signal_backend FROM {pg.owner}")
    hostile.execute("BEGIN")
    hostile.execute(NO_OP_GRANTS["schema"])
    res = _init_again(pg, timeout="2")
    assert res.returncode == 1
    pid = hostile.info.backend_pid
    assert f"session {pid} ({pg.appender}: ending it was refused" in res.stderr, res.stderr
    assert f"GRANT pg_signal_backend TO {pg.owner}" in res.stderr, res.stderr
    assert "the owner's own" not in res.stderr and "a superuser's" not in res.stderr
    assert hostile.execute("SELECT 1").fetchone() == (1,)  # not ended


def test_chain_init_goes_through_hosts_spinning_no_op_grants_on_its_rows(pg: Chain) -> None:
    # Each GRANT is its own short transaction (never found holding the row at two looks);
    # one that commits between init's read of a row and its update of it fails init's
    # statement with "tuple concurrently updated" unless init tries it again.
    stop = threading.Event()

    def spin() -> None:
        with psycopg.connect(pg.url, autocommit=True) as conn:
            while not stop.is_set():
                for function in ("head()", "extent()", "read_meta(text)", "open_append(bigint)"):
                    with contextlib.suppress(psycopg.Error):
                        conn.execute(
                            f"GRANT EXECUTE ON FUNCTION floorguard_api.{function} TO CURRENT_USER"
                        )

    spinners = [threading.Thread(target=spin, daemon=True) for _ in range(2)]
    for spinner in spinners:
        spinner.start()
    failed = []
    try:
        for n in range(6):
            res = _init_again(pg, home=f"init{n}")
            if res.returncode != 0:
                failed.append(res.stderr.strip())
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join(10)
    assert not failed, failed[:2]


def test_chain_init_takes_away_what_a_host_role_was_given_directly_or_passed_on(
    pg: Chain,
) -> None:
    # Grants chain init never made, an owner's by hand: to the appenders' role WITH GRANT
    # OPTION (which a host then passed on to another role), and straight to a host's login.
    role = appender_role(pg.database)
    other = f"other_{secrets.token_hex(3)}"
    pg.server.psql(f"CREATE ROLE {other} LOGIN")
    pg.sql(
        f'GRANT USAGE ON SCHEMA floorguard TO "{role}" WITH GRANT OPTION;'
        f' GRANT SELECT ON floorguard.records TO "{role}" WITH GRANT OPTION;'
        f" GRANT USAGE ON SCHEMA floorguard TO {pg.appender};"
        f" GRANT SELECT, INSERT ON floorguard.tree TO {pg.appender}"
    )
    pg.sql(
        f"GRANT USAGE ON SCHEMA floorguard TO {other};"
        f" GRANT SELECT ON floorguard.records TO {other}",
        as_owner=False,
    )
    res = _init_again(pg, pg.appender)
    assert res.returncode == 0, res.stderr
    for holder in (role, pg.appender, other):
        assert (
            pg.sql(
                f"SELECT has_schema_privilege('{holder}', 'floorguard', 'USAGE'),"
                f" has_table_privilege('{holder}', 'floorguard.tree', 'INSERT')"
            )
            == "f|f"
        ), holder
