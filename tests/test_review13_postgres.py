"""Review of the PostgreSQL chain (issue 13): attacks on what the README claims of it.

Each test is named after the attack it stops. The server is tests/pgserver.py's; the
databases and roles are made per test by test_chain_postgres's ``pg`` fixture.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pgserver
import psycopg
import pytest
from helpers.cli import isolated_env
from helpers.pg_chain import APPEND_SCRIPT, NOW_TS, Chain, append, floorctl, stalling_proxy, verify

from floorguard.chainstore.postgres import LOCK_STATEMENT, redact

pytestmark = pytest.mark.fleet


# --- a server that stops answering -----------------------------------------------------------


def test_a_server_that_stops_answering_mid_append_cannot_hang_the_spawn(pg: Chain) -> None:
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    with stalling_proxy(sock, b"EXECUTE floorguard_open") as proxy:
        url = f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}"
        env = {
            **pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT="1"),
            "FLOORGUARD_CHAIN_URL": url,
        }
        try:
            done = append(env, timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the append hung for 30 s behind a server that stopped answering")
        assert proxy.stalled.is_set()  # the attack happened: the lock's answer was swallowed
    assert done.returncode == 1
    assert "refused: cannot append to the audit chain" in done.stderr
    assert "FLOORGUARD_CHAIN_TIMEOUT" in done.stderr
    # The server itself was fine: the next append through it works and the chain verifies.
    assert append(pg.env(pg.key_file.parent)).returncode == 0
    assert verify(pg).returncode == 0


@pytest.mark.parametrize("trigger", [b"REPEATABLE READ", b"FROM floorguard.records"])
def test_a_server_that_stops_answering_mid_read_cannot_hang_an_export(
    pg: Chain, trigger: bytes, tmp_path: Path
) -> None:
    assert append(pg.env(tmp_path)).returncode == 0
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    with stalling_proxy(sock, trigger) as proxy:
        url = f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}"
        env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="1"), "FLOORGUARD_CHAIN_URL": url}
        try:
            done = subprocess.run([sys.executable, "-m", "floorctl", "chain", "export"],
                                  capture_output=True, text=True, env=env, timeout=30)  # fmt: skip
        except subprocess.TimeoutExpired:
            pytest.fail("the export hung for 30 s behind a server that stopped answering")
        assert proxy.stalled.is_set()
    assert done.returncode == 1
    assert "no answer within" in done.stderr and "FLOORGUARD_CHAIN_TIMEOUT" in done.stderr


def test_a_port_that_accepts_but_never_answers_refuses_the_append_not_hangs(
    pg: Chain, tmp_path: Path
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as mute:  # the kernel accepts; no one reads
        url = f"postgresql://{pg.appender}@127.0.0.1:{mute.getsockname()[1]}/{pg.database}"
        env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="1"), "FLOORGUARD_CHAIN_URL": url}
        try:
            done = append(env, timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the append hung for 30 s on a port that never answers")
    assert done.returncode == 1
    assert "cannot append to the audit chain" in done.stderr


# --- a database whose sessions default to another isolation level -----------------------------


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


# --- passwords in messages -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:Sup3rSecret@[::1/db",  # urlsplit refuses it: not redacted by URL rules
        "postgresql://app@localhost/db?sslpassword=Sup3rSecret",
        "postgresql://app:Sup3rSecret%zz@localhost/db",  # libpq quotes the bad token
        "host=localhost password=Sup3r Secret dbname=db",  # libpq quotes the stray word
        "host=localhost sslpassword=Sup3rSecret dbname=db",
    ],
)
def test_a_password_in_the_url_never_appears_in_an_error_or_location(
    url: str, tmp_path: Path
) -> None:
    assert "Sup3r" not in redact(url) and "Secret" not in redact(url)
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_URL=url, FLOORGUARD_CHAIN_TIMEOUT="1",
                       PGCONNECT_TIMEOUT="1")  # fmt: skip
    for argv in (["chain", "export"], ["chain", "init", "--url", url]):
        done = floorctl(*argv, env=env)
        assert done.returncode == 1, done
        assert "Sup3r" not in done.stderr + done.stdout
        assert "Secret" not in done.stderr + done.stdout
    done = append(env)
    assert done.returncode == 1
    assert "Sup3r" not in done.stderr and "Secret" not in done.stderr


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


# --- configuration that cannot be used -------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e9", "five", " "])
def test_an_unusable_chain_timeout_is_refused_before_connecting(pg: Chain, value: str) -> None:
    env = pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT=value)
    done = append(env)
    assert done.returncode == 1
    assert "FLOORGUARD_CHAIN_TIMEOUT" in done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "0"


def test_psycopg_missing_with_a_chain_url_is_refused_naming_the_extra(
    pg: Chain, tmp_path: Path
) -> None:
    shadow = tmp_path / "shadow" / "psycopg"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no psycopg here')\n")
    env = pg.env(pg.key_file.parent, PYTHONPATH=str(shadow.parent))
    done = append(env)
    assert done.returncode == 1
    assert "floorguard[postgres]" in done.stderr
    done = floorctl("chain", "export", env=env)
    assert done.returncode == 1
    assert "floorguard[postgres]" in done.stderr


def test_import_floorguard_and_a_sqlite_append_never_load_psycopg(tmp_path: Path) -> None:
    probe = APPEND_SCRIPT.replace("print(record.seq)", "print('psycopg' in sys.modules)")
    env = isolated_env(tmp_path)
    env.pop("FLOORGUARD_CHAIN_URL", None)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert os.path.exists(tmp_path / "chain.sqlite3") or any(tmp_path.rglob("chain.sqlite3"))


# --- a host with another key ------------------------------------------------------------------


def _other_key(tmp_path: Path) -> Path:
    other = tmp_path / "other" / "chain.key"
    other.parent.mkdir(mode=0o700)
    other.write_text(os.urandom(32).hex() + "\n")
    other.chmod(0o600)
    return other


def test_a_host_with_another_key_cannot_write_the_genesis_record(pg: Chain, tmp_path: Path) -> None:
    # The first append of a fresh shared chain: a host given the wrong key would otherwise
    # write a genesis that only its key verifies, locking every other host out.
    stray = {**pg.env(tmp_path / "stray"), "FLOORGUARD_CHAIN_KEY_FILE": str(_other_key(tmp_path))}
    done = append(stray)
    assert done.returncode == 1
    assert "key" in done.stderr and "chain init" in done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "0"
    assert append(pg.env(tmp_path / "good")).returncode == 0
    # After genesis the head's MAC already tells: refused before anything is written.
    assert append(stray).returncode == 1
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"
    assert verify(pg).returncode == 0


def test_chain_init_with_another_key_than_the_fleets_is_refused(pg: Chain, tmp_path: Path) -> None:
    env = isolated_env(tmp_path / "admin2", FLOORGUARD_CHAIN_KEY_FILE=str(_other_key(tmp_path)))
    done = floorctl("chain", "init", "--url", pg.owner_url, env=env)
    assert done.returncode == 1
    assert "key" in done.stderr


# --- the appender role working around the triggers --------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE floorguard.records DISABLE TRIGGER records_append_only",
        "DROP TRIGGER records_append_only ON floorguard.records",
        "TRUNCATE floorguard.records",
        "INSERT INTO floorguard.meta VALUES ('key_check', 'x')",
        "CREATE TABLE floorguard.records2 (seq bigint)",
        "CREATE OR REPLACE FUNCTION floorguard.refuse_change() RETURNS trigger"
        " LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
    ],
)
def test_the_appender_cannot_switch_off_or_sidestep_the_append_only_rules(
    pg: Chain, statement: str, tmp_path: Path
) -> None:
    assert append(pg.env(tmp_path)).returncode == 0
    with pytest.raises(RuntimeError, match=r"must be owner|permission denied"):
        pg.sql(statement, as_owner=False)
    assert verify(pg).returncode == 0


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
    pg.sql(
        # stamped now, as the record check asks: only the MAC is forged
        f"INSERT INTO floorguard.records SELECT 1, {NOW_TS},"  # noqa: S608
        " chain_id, event, receipt_id, receipt, prev, repeat('0', 64)"
        " FROM floorguard.records WHERE seq = 0",
    )
    done = append(env)
    assert done.returncode == 0 and "does not verify with the key" in done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "3"
    assert verify(pg).returncode == 1


# --- two chains in one cluster ----------------------------------------------------------------


def test_a_host_of_one_chain_cannot_insert_into_another_chain_in_the_same_cluster(
    pg: Chain, tmp_path: Path
) -> None:
    other_owner, other_db = f"{pg.owner}_b", f"{pg.database}_b"
    pg.server.psql(f"CREATE ROLE {other_owner} LOGIN CREATEROLE")
    pg.server.psql(f"CREATE DATABASE {other_db} OWNER {other_owner}")
    env = isolated_env(tmp_path / "b", FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "b.key"))
    done = floorctl("chain", "init", "--url", pg.server.url(other_owner, other_db), env=env)
    assert done.returncode == 0, done.stderr
    with pytest.raises(RuntimeError, match="permission denied"):
        pg.server.psql(
            "INSERT INTO floorguard.tree VALUES (5, 5, '\\x00')",
            user=pg.appender,
            database=other_db,
        )


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
