"""Review of the PostgreSQL chain (review 15): attacks on what README "### PostgreSQL chain"
claims. A test whose docstring starts with "Was a BREAK" failed on the code it was written
against (commit c1e4cea) and passes since the fix it names.

The server is tests/pgserver.py's; the databases and roles are made per test by
test_chain_postgres's ``pg`` fixture.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pgserver
import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.pg_chain import (
    CANARY,
    Chain,
    _call,
    _next,
    append,
    floorctl,
    signed_checkpoint,
    stalling_proxy,
    verify,
)

from floorguard.chainstore.postgres import LOCK_STATEMENT, appender_role

pytestmark = pytest.mark.fleet


# --- secrets in the URL ------------------------------------------------------------------------


@pytest.mark.parametrize("mark", ["#", "?"])
def test_a_password_with_a_hash_or_question_mark_never_appears_in_the_refusal(
    pg: Chain, tmp_path: Path, mark: str
) -> None:
    """Was a BREAK (fixed in redact): the README says the password is never shown; libpq
    reads a password holding '#' or '?' whole, but redact() split the URL with urllib,
    which ends the netloc there, and the refusal printed "postgresql://host-17:s3cr"."""
    url = f"postgresql://host-17:s3cr{mark}Tpw@127.0.0.1:1/audit"
    env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="1"), "FLOORGUARD_CHAIN_URL": url}
    done = append(env)
    assert done.returncode == 1
    assert "cannot append to the audit chain" in done.stderr
    assert "s3cr" not in done.stderr, done.stderr


# --- bounded waits -----------------------------------------------------------------------------


def test_chain_init_behind_a_server_that_stops_answering_is_cut_not_hung(
    pg: Chain, tmp_path: Path
) -> None:
    """Was a BREAK (fixed: init runs under the watchdog too): the README says a silent
    server is cut after twice FLOORGUARD_CHAIN_TIMEOUT and every wait is bounded; `floorctl
    chain init` ran its DDL outside the watchdog, so behind a server that stops answering
    it hung (killed here after 30 s)."""
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    with stalling_proxy(sock, b"CREATE SCHEMA") as proxy:
        url = f"postgresql://{pg.owner}@127.0.0.1:{proxy.port}/{pg.database}"
        env = isolated_env(tmp_path / "op", FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file),
                           FLOORGUARD_CHAIN_TIMEOUT="1")  # fmt: skip
        started = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "floorctl", "chain", "init", "--url", url],
                capture_output=True, text=True, env=env, timeout=30, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            pytest.fail("chain init hung for 30 s behind a server that stopped answering")
        assert proxy.stalled.is_set()
    assert done.returncode != 0
    assert time.monotonic() - started < 15


def test_a_url_asking_for_longer_lock_and_statement_timeouts_cannot_stretch_the_wait(
    pg: Chain, tmp_path: Path
) -> None:
    """Was a BREAK of the README's wording: it said settings in the URL win, while the
    statement, lock and idle-transaction timeouts are always FLOORGUARD_CHAIN_TIMEOUT's.
    The README now says so; this holds it: a URL asking for 8 s waits at most the 2 s."""
    options = quote("-c lock_timeout=8000 -c statement_timeout=8000")
    env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="2"),
           "FLOORGUARD_CHAIN_URL": f"{pg.url}&options={options}"}  # fmt: skip
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(pg.owner_url) as conn:
            conn.execute(LOCK_STATEMENT)
            holding.set()
            release.wait(60)
            conn.rollback()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        done = append(env)
    finally:
        release.set()
        holder.join()
    assert done.returncode == 1
    assert "another appender held the chain for more than 2s" in done.stderr, done.stderr


# --- the append-only rules and the roles ---------------------------------------------------


def test_a_superuser_outside_the_owner_role_cannot_delete_records(pg: Chain) -> None:
    """Was a BREAK (fixed: the triggers are ENABLE ALWAYS): the README says the triggers
    refuse DELETE to every role but the owner, a superuser included; a superuser that set
    session_replication_role = replica (no ALTER TABLE, no SET ROLE) deleted a record and
    the triggers never fired."""
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    try:
        pg.server.psql(
            "SET session_replication_role = replica; DELETE FROM floorguard.records WHERE seq = 1",
            database=pg.database,
        )
    except RuntimeError as exc:
        assert "append-only" in str(exc)
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "3"


def test_chain_init_never_leaves_a_login_appender_role(server: object, tmp_path: Path) -> None:
    """Was a BREAK (fixed: init refuses such a role): the README says chain init makes the
    NOLOGIN role floorguard_appender_DATABASE; a role of that name made beforehand with
    LOGIN and a password (by anyone with CREATEROLE) was reused as it was and given
    SELECT and INSERT on the chain."""
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


# --- tampering and the offline verifier --------------------------------------------------


def test_the_owner_dropping_the_last_records_is_caught_by_an_earlier_checkpoint(
    pg: Chain, tmp_path: Path
) -> None:
    """Holds: the owner deletes the last acknowledged record and its tree rows; the export
    verifies alone, but `verify chain` against the checkpoint signed before refuses it."""
    chain = pg.chain()
    for n in range(5):
        chain.append(CANARY, receipt(n=n))
    cp, _ = signed_checkpoint(pg, tmp_path)
    env = pg.env(tmp_path / "auditor")
    pg.sql("DELETE FROM floorguard.records WHERE seq = 4;"
           " DELETE FROM floorguard.tree WHERE (level = 0 AND idx = 4)")  # fmt: skip
    export = tmp_path / "slice.jsonl"
    done = floorctl("chain", "export", "--out", str(export), env=env)
    assert done.returncode == 0, done.stderr
    alone = floorctl("verify", "chain", str(export), "--key-file", str(pg.key_file), env=env)
    assert alone.returncode == 0, alone.stdout  # a hash chain alone cannot see a lost tail
    against = floorctl("verify", "chain", str(export), "--checkpoint", str(cp), "--pubkey",
                       str(tmp_path / "keys" / "signing.pub"), env=env)  # fmt: skip
    assert against.returncode != 0, against.stdout


def test_a_record_a_host_appends_without_the_key_fails_the_verifier(
    pg: Chain, tmp_path: Path
) -> None:
    """Holds: a host role appends record 2, well formed but with a forged MAC, through the
    chain's functions (the server checks a MAC's form, not the key); the export's
    verification names seq 2, and no checkpoint is signed over it."""
    import psycopg

    env = pg.env(tmp_path)
    assert append(env).returncode == 0 and append(env).returncode == 0
    with psycopg.connect(pg.url) as conn:
        _call(conn, *_next(conn, b"not the fleet's key", mac="0" * 64))
        conn.commit()
    export = tmp_path / "slice.jsonl"
    assert floorctl("chain", "export", "--out", str(export), env=env).returncode == 0
    done = floorctl("verify", "chain", str(export), "--key-file", str(pg.key_file), env=env)
    assert done.returncode != 0 and "seq 2" in done.stdout, done.stdout
    assert verify(pg).returncode != 0
