"""Review of the PostgreSQL chain (review 16): attacks on what README "### PostgreSQL chain"
claims, from angles reviews 13-15 did not take. A test whose docstring starts with "Was a
BREAK" failed on the code it was written against (commit b3b8388) and holds since the fix
it names.

The server is tests/pgserver.py's; the databases and roles are made per test by
test_chain_postgres's ``pg`` fixture.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.pg_chain import CANARY, Chain, append, floorctl, signed_checkpoint

from floorguard.chain import AuditChain
from floorguard.chainstore.postgres import APPENDER_ROLE, LOCK_KEY, LOCK_STATEMENT, appender_role
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet


SECRET_URL = "postgresql://host-17:s3cretpw@127.0.0.1:1/audit"


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- one appender role per database ------------------------------------------------------------


def test_a_database_named_after_the_digest_of_a_long_name_shares_that_chains_appender_role(
    pg: Chain, tmp_path: Path
) -> None:
    """Was a BREAK (fixed: a digest's form is floorguard_appender-<hex>, which no database
    name gives): the README says each database gets its own appender role, so a host of
    one chain cannot append to another chain in the cluster; appender_role() hashed a long
    database name to floorguard_appender_<24 hex>, which was also the role of a database
    named <24 hex>, so `chain init` there reused the long database's role."""
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


# --- the chain's lock --------------------------------------------------------------------------


def test_a_role_with_no_privilege_on_the_chain_cannot_stop_every_append(
    pg: Chain, tmp_path: Path
) -> None:
    """Was a BREAK (fixed: the lock is floorguard.append_lock's, taken only inside the
    chain's functions): the README says a holder of the chain's lock
    holds it for at most the timeout and the others go on; the lock was a
    pg_advisory_xact_lock on a public constant, which any role that may connect (PUBLIC
    has CONNECT) could take at session level, refusing every append of the fleet."""
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


# --- the server's clock ------------------------------------------------------------------------


def test_a_modified_host_cannot_stamp_the_fleets_later_records_with_a_future_time(
    pg: Chain, tmp_path: Path
) -> None:
    """Was a BREAK (fixed: a trigger refuses a record stamped after the server's clock or
    before the head): the README says a record's ts is the database server's clock, so no
    host can push the fleet's later records out of every --since/--until window; the ts is
    computed and MACed by the client, and the database accepted any value, so one host
    (with the fleet's key, as every host has) stamping 2099 made every later record 2099."""
    rogue = AuditChain.from_env(
        pg.env(tmp_path / "rogue"), clock=lambda: "2099-01-01T00:00:00.000000Z"
    )
    with pytest.raises(ChainWriteError, match=r"stamped 2099-01-01T00:00:00\.000000Z"):
        rogue.append(CANARY, receipt(n=0))
    rogue.close()
    assert append(pg.env(tmp_path / "first")).returncode == 0
    assert append(pg.env(tmp_path / "honest")).returncode == 0
    ts = pg.sql("SELECT ts FROM floorguard.records WHERE seq = 1")
    assert abs(_ts(ts) - datetime.now(UTC)) < timedelta(minutes=5), ts


def test_records_are_stamped_in_utc_whatever_the_servers_timezone_datestyle_and_lc_time(
    pg: Chain, tmp_path: Path
) -> None:
    """Holds: the ts is to_char of clock_timestamp() AT TIME ZONE 'UTC' with no locale
    pattern, so a database set to UTC+14, DMY dates and sql_standard intervals changes
    nothing; an export window around now finds the record."""
    pg.sql(f"ALTER DATABASE {pg.database} SET timezone = 'Pacific/Kiritimati';"
           f" ALTER DATABASE {pg.database} SET datestyle = 'SQL, DMY';"
           f" ALTER DATABASE {pg.database} SET intervalstyle = 'sql_standard';"
           f" ALTER DATABASE {pg.database} SET lc_time = 'C'")  # fmt: skip
    before = datetime.now(UTC)
    assert append(pg.env(tmp_path / "h")).returncode == 0
    ts = pg.sql("SELECT ts FROM floorguard.records WHERE seq = 0")
    assert ts.endswith("Z") and len(ts) == len("2026-01-01T00:00:00.000000Z"), ts
    assert abs(_ts(ts) - before) < timedelta(minutes=1), ts
    env = pg.env(tmp_path / "auditor")
    since = (before - timedelta(minutes=1)).isoformat()
    until = (before + timedelta(minutes=1)).isoformat()
    done = floorctl("chain", "export", "--since", since, "--until", until, env=env)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["ts"] for line in done.stdout.splitlines()] == [ts]


# --- floorctl with a PostgreSQL URL ------------------------------------------------------------


def _a_checkpoint(pg: Chain, tmp_path: Path) -> tuple[Path, Path]:
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    chain.close()
    return signed_checkpoint(pg, tmp_path)


@pytest.mark.parametrize("command", ["export", "checkpoint", "prove", "consistency", "init"])
def test_every_chain_command_against_an_unreachable_database_is_one_line_exit_1_no_secret(
    pg: Chain, tmp_path: Path, command: str
) -> None:
    """Holds: each `floorctl chain` command against a database it cannot reach exits 1
    within the timeout with one `floorctl: error:` line naming the URL without its
    password, and no traceback."""
    cp, key = _a_checkpoint(pg, tmp_path)
    args = {
        "export": ["export"],
        "checkpoint": ["checkpoint", "--signing-key", str(key)],
        "prove": ["prove", "--seq", "0", "--checkpoint", str(cp)],
        "consistency": ["consistency", "--old", str(cp)],
        "init": ["init", "--url", SECRET_URL],
    }[command]
    env = {**pg.env(tmp_path / "other", FLOORGUARD_CHAIN_TIMEOUT="1"),
           "FLOORGUARD_CHAIN_URL": SECRET_URL}  # fmt: skip
    started = time.monotonic()
    done = floorctl("chain", *args, env=env)
    assert time.monotonic() - started < 20
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("floorctl: error:"), done.stderr
    assert "Traceback" not in done.stderr
    assert "s3cret" not in done.stderr + done.stdout
    assert "postgresql://host-17@127.0.0.1:1/audit" in done.stderr, done.stderr


def test_pg_environment_variables_complete_a_url_that_names_only_the_scheme(
    pg: Chain, tmp_path: Path
) -> None:
    """Holds: libpq fills in host, user and database from PGHOST, PGUSER and PGDATABASE, as
    the README says; the append lands in the chain."""
    env = pg.env(tmp_path / "h")
    env.update(FLOORGUARD_CHAIN_URL="postgresql://", PGHOST=str(pg.server.socket_dir),
               PGUSER=pg.appender, PGDATABASE=pg.database)  # fmt: skip
    if pg.server.port is not None:
        env["PGPORT"] = str(pg.server.port)
    done = append(env)
    assert done.returncode == 0, done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"


# --- a read-only session (a hot standby, or default_transaction_read_only) ---------------------


def test_a_read_only_session_refuses_the_append_in_one_line_and_writes_nothing(
    pg: Chain, tmp_path: Path
) -> None:
    """Holds: a URL to a read-only server (here the role defaults to read-only
    transactions, as every session on a hot standby is) refuses the spawn with one line,
    records nothing, and the next append after it is writable again succeeds."""
    pg.server.psql(f"ALTER ROLE {pg.appender} SET default_transaction_read_only = on")
    env = pg.env(tmp_path / "h", FLOORGUARD_CHAIN_TIMEOUT="2")
    done = append(env)
    assert done.returncode == 1
    assert "read-only" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "0"
    pg.server.psql(f"ALTER ROLE {pg.appender} RESET default_transaction_read_only")
    assert append(env).returncode == 0


# --- the owner altered meta ---------------------------------------------------------------------


def test_the_owner_changing_meta_chain_id_stops_appends_naming_the_alteration(
    pg: Chain, tmp_path: Path
) -> None:
    """Holds: records name their chain; a chain_id in meta the owner changed afterwards
    refuses the next append in one line, instead of appending under a second identity."""
    assert append(pg.env(tmp_path / "h")).returncode == 0
    pg.sql("UPDATE floorguard.meta SET value = repeat('a', 32) WHERE key = 'chain_id'")
    done = append(pg.env(tmp_path / "h2"))
    assert done.returncode == 1
    assert "the database was altered" in done.stderr, done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"


# --- roles with unusual names ------------------------------------------------------------------


def test_a_login_role_with_quotes_and_capitals_is_granted_and_appends(
    pg: Chain, tmp_path: Path
) -> None:
    """Holds: --grant takes the role's exact name (quoted as an identifier, no SQL built
    from it): a role named Host "17"; DROP is granted, appends, and nothing else ran."""
    name = 'Host "17"; DROP'
    pg.server.psql('CREATE ROLE "Host ""17""; DROP" LOGIN')
    env = isolated_env(pg.key_file.parent, FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file))
    done = floorctl("chain", "init", "--url", pg.owner_url, "--grant", name, env=env)
    assert done.returncode == 0, done.stderr
    url = pg.server.url("Host%20%2217%22%3B%20DROP", pg.database)
    env = {**pg.env(tmp_path / "h"), "FLOORGUARD_CHAIN_URL": url}
    done = append(env)
    assert done.returncode == 0, done.stderr


# --- checkpoints and proofs while many hosts append ------------------------------------------


def test_checkpoints_signed_while_two_hosts_append_are_each_consistent_with_the_last(
    pg: Chain, tmp_path: Path
) -> None:
    """Holds: a checkpoint is of one snapshot (the records and the stored tree agree for
    its size), so checkpoints taken while appends are in flight each prove consistent with
    the one before, and record 0's inclusion verifies in every one."""
    script = (
        "import sys\nfrom floorguard.chain import AuditChain\n"
        "from helpers.chain_support import receipt\n"
        "c = AuditChain.from_env()\n"
        "for n in range(150):\n    c.append('adapter.canary_receipt', receipt(n=n))\n"
    )
    tests_dir = str(Path(__file__).parent)
    appenders = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=tests_dir,
            env={**pg.env(tmp_path / f"h{i}"), "PYTHONPATH": tests_dir},
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    env = pg.env(tmp_path / "auditor")
    assert floorctl("keygen", "--out", str(tmp_path / "keys"), env=env).returncode == 0
    key, pub = str(tmp_path / "keys" / "signing.key"), str(tmp_path / "keys" / "signing.pub")
    previous: Path | None = None
    try:
        for i in range(6):
            if i == 0:
                while pg.sql("SELECT count(*) FROM floorguard.records") == "0":
                    time.sleep(0.05)
            cp = tmp_path / f"cp{i}"
            done = floorctl("chain", "checkpoint", "--signing-key", key, "--out", str(cp), env=env)
            assert done.returncode == 0, done.stderr
            proof = tmp_path / f"incl{i}.json"
            done = floorctl("chain", "prove", "--seq", "0", "--checkpoint", str(cp),
                            "--out", str(proof), env=env)  # fmt: skip
            assert done.returncode == 0, done.stderr
            done = floorctl("verify", "inclusion", str(proof), "--checkpoint", str(cp),
                            "--pubkey", pub, env=env)  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            if previous is not None:
                cons = tmp_path / f"cons{i}.json"
                done = floorctl("chain", "consistency", "--old", str(previous), "--new", str(cp),
                                "--out", str(cons), env=env)  # fmt: skip
                assert done.returncode == 0, done.stderr
                done = floorctl("verify", "consistency", "--old", str(previous),
                                "--new", str(cp), "--proof", str(cons), "--pubkey", pub,
                                env=env)  # fmt: skip
                assert done.returncode == 0, done.stdout + done.stderr
            previous = cp
    finally:
        for proc in appenders:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "300"
