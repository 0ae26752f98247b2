"""What an appender's PostgreSQL session guarantees whatever the server's defaults say.

- A commit is synchronous even where the URL, the role or the database asks for
  ``synchronous_commit=off``: a decision is returned only once its record is durable.
- Backslashes in string literals are read as the append functions were written to be read
  (``standard_conforming_strings`` on), whatever the URL or the role says.
- A process frozen while it holds the chain's lock holds it for at most its timeout: the
  server ends the idle transaction, and the other appenders go on.
- An append refused inside its transaction rolls back and leaves the session usable: the
  next append runs on the same session, with the statements prepared when it opened.
- Objects another role creates in ``public`` cannot stand in for the built-ins an append
  computes with (the session's search path is pinned).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import CANARY, Chain
from helpers.tree_support import assert_tree_matches_records

from floorguard._chain.chain import AuditChain
from floorguard.errors import KeyFileError


def _chain_at(pg: Chain, url: str, **extra: str) -> AuditChain:
    env = pg.env(pg.key_file.parent, **extra)
    env["FLOORGUARD_CHAIN_URL"] = url
    return AuditChain.from_env(env)


def _session_setting(chain: AuditChain, name: str) -> str:
    """A setting of the chain's own write session (the one its appends committed on)."""
    conn = chain.store._conn  # type: ignore[attr-defined]
    assert conn is not None
    row = conn.execute("SELECT pg_catalog.current_setting(%s)", (name,)).fetchone()
    assert row is not None
    return str(row[0])


def _backend_pid(chain: AuditChain) -> int:
    conn = chain.store._conn  # type: ignore[attr-defined]
    assert conn is not None
    return int(conn.info.backend_pid)


# --- synchronous commit ----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["url", "role", "database"])
def test_a_session_that_defaults_to_asynchronous_commit_commits_synchronously(
    pg: Chain, where: str
) -> None:
    url = pg.url
    if where == "url":
        url += "&options=-c%20synchronous_commit%3Doff"
    elif where == "role":
        pg.server.psql(f"ALTER ROLE {pg.appender} SET synchronous_commit = off")
    else:
        pg.server.psql(f"ALTER DATABASE {pg.database} SET synchronous_commit = off")
    with psycopg.connect(url) as plain:  # the attack took: a plain session commits async
        row = plain.execute("SHOW synchronous_commit").fetchone()
        assert row is not None and row[0] == "off"
    chain = _chain_at(pg, url)
    chain.append(CANARY, receipt())
    assert _session_setting(chain, "synchronous_commit") == "on"
    chain.append(CANARY, receipt())
    assert assert_tree_matches_records(chain) == 2


@pytest.mark.parametrize("where", ["url", "role"])
def test_a_session_that_reads_backslashes_as_escapes_still_appends(pg: Chain, where: str) -> None:
    # The append functions are compiled with the caller's settings: with
    # standard_conforming_strings off their '\u0000' literals would not parse, and a host
    # so configured could never append.
    url = pg.url
    if where == "url":
        url += "&options=-c%20standard_conforming_strings%3Doff"
    else:
        pg.server.psql(f"ALTER ROLE {pg.appender} SET standard_conforming_strings = off")
    with psycopg.connect(url) as plain:
        row = plain.execute("SHOW standard_conforming_strings").fetchone()
        assert row is not None and row[0] == "off"
    chain = _chain_at(pg, url)
    chain.append(CANARY, receipt())
    chain.append(CANARY, receipt())
    assert _session_setting(chain, "standard_conforming_strings") == "on"
    assert assert_tree_matches_records(chain) == 2


# --- a frozen appender -----------------------------------------------------------------------

FROZEN_HOLDER = textwrap.dedent(
    """
    import os, signal
    from floorguard._chain.chain import AuditChain
    chain = AuditChain.from_env()
    chain.append("adapter.canary_receipt", {"kind": "adapter.canary_receipt",
                 "schema_version": 1, "ts": "2026-12-02T00:00:00Z"})

    def freeze(view):
        # Inside the append's transaction, after the lock: stop as a frozen VM would.
        print("holding", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)

    chain.store.write(freeze, "append to")
    """
)


def test_a_process_frozen_while_holding_the_lock_holds_it_only_for_its_timeout(
    pg: Chain, tmp_path: Path
) -> None:
    env = pg.env(tmp_path / "frozen-host", FLOORGUARD_CHAIN_TIMEOUT="1")
    frozen = subprocess.Popen([sys.executable, "-c", FROZEN_HOLDER], env=env,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert frozen.stdout is not None and frozen.stdout.readline() == "holding\n"
        holders = pg.server.psql(  # as a superuser: other roles' states are hidden otherwise
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND state = 'idle in transaction'",
            database=pg.database,
        )
        assert holders == "1"  # the frozen process, in its transaction, holds the lock
        # Its lock is released by the server after 1 s; this append waits up to 5 s.
        other = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="5")
        started = time.monotonic()
        record = other.append(CANARY, receipt())
        waited = time.monotonic() - started
        assert record.seq == 1  # the frozen transaction wrote nothing
        assert waited < 5  # it did not give up on a lock that was never released
    finally:
        os.kill(frozen.pid, signal.SIGKILL)
        frozen.wait(timeout=30)
    assert assert_tree_matches_records(other) == 2


# --- a refused append ------------------------------------------------------------------------


def test_an_append_refused_in_its_transaction_leaves_the_session_usable(pg: Chain) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt())
    session = _backend_pid(chain)
    pg.key_file.chmod(0o644)  # refused inside the transaction, after the lock and the head
    with pytest.raises(KeyFileError):
        chain.append(CANARY, receipt())
    pg.key_file.chmod(0o600)
    for _ in range(6):  # on the statements prepared when the session opened
        chain.append(CANARY, receipt())
    assert _backend_pid(chain) == session  # rolled back and kept, not reopened
    assert assert_tree_matches_records(chain) == 7


# --- the search path -------------------------------------------------------------------------

# An exact match for "integer || text" beats pg_catalog's "anynonarray || text" wherever
# public is on the search path: it would hand the appender a forged sibling hash.
FORGED_CONCAT = """
CREATE FUNCTION public.forged_concat(integer, text) RETURNS text LANGUAGE sql
  AS $$ SELECT $1::text || ':' || repeat('00', 32) || ',' $$;
CREATE OPERATOR public.|| (LEFTARG = integer, RIGHTARG = text, FUNCTION = public.forged_concat);
"""


def test_an_operator_another_role_puts_in_public_cannot_change_an_append(pg: Chain) -> None:
    chain = pg.chain()
    for _ in range(3):
        chain.append(CANARY, receipt())
    intruder = f"{pg.appender}_intruder"
    pg.server.psql(f"CREATE ROLE {intruder} LOGIN")
    pg.server.psql(f"GRANT CREATE ON SCHEMA public TO {intruder}", database=pg.database)
    pg.server.psql(FORGED_CONCAT, user=intruder, database=pg.database)
    pg.server.psql(f"ALTER ROLE {pg.appender} SET search_path = public, pg_catalog")
    with psycopg.connect(pg.url) as plain:  # the attack took: a plain session uses it
        row = plain.execute("SELECT 1 || ':'::text").fetchone()
        assert row is not None and row[0].endswith(",")
    fresh = pg.chain()
    for _ in range(5):
        fresh.append(CANARY, receipt())
    assert _session_setting(fresh, "search_path") == "pg_catalog, pg_temp"
    assert assert_tree_matches_records(fresh) == 8


# --- whose clock -----------------------------------------------------------------------------

SKEWED_HOST = textwrap.dedent(
    """
    import datetime
    import floorguard._base._time
    from floorguard._chain.chain import AuditChain
    # This host's clock runs five years ahead (a broken NTP, or its owner's choice).
    floorguard._base._time.utc_now = lambda: datetime.datetime(2031, 6, 1, tzinfo=datetime.UTC)
    record = AuditChain.from_env().append("adapter.canary_receipt", {
        "kind": "adapter.canary_receipt", "schema_version": 1, "ts": "2031-06-01T00:00:00Z"})
    print(record.ts)
    """
)


def test_a_host_whose_clock_runs_ahead_cannot_stamp_the_fleets_records_with_its_future(
    pg: Chain, tmp_path: Path
) -> None:
    pg.chain().append(CANARY, receipt())
    host = pg.env(tmp_path / "skewed-host")
    skewed = subprocess.run([sys.executable, "-c", SKEWED_HOST], capture_output=True,
                            text=True, env=host, timeout=60, check=False)  # fmt: skip
    assert skewed.returncode == 0, skewed.stderr
    server_year = pg.sql("SELECT extract(year FROM now())::int")
    assert skewed.stdout.startswith(f"{server_year}-"), skewed.stdout  # the server's time
    after = pg.chain().append(CANARY, receipt())
    assert after.ts.startswith(f"{server_year}-")  # and the hosts after it keep theirs
    since = f"{server_year}-01-01T00:00:00Z"
    window = subprocess.run(
        [sys.executable, "-m", "floorctl", "chain", "export", "--since", since],
        capture_output=True, text=True, env=pg.env(pg.key_file.parent), timeout=60, check=False,
    )  # fmt: skip
    assert window.returncode == 0, window.stderr
    assert len(window.stdout.splitlines()) == 3  # all three in this year's window


# --- a COMMIT that is no commit ----------------------------------------------------------------


def test_a_commit_the_server_answers_with_rollback_is_refused(pg: Chain) -> None:
    from floorguard.chainstore.postgres_wire import _committed

    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.pgconn.exec_(b"BEGIN")
        conn.pgconn.exec_(b"SELECT 1/0")  # the transaction is now aborted
        answer = conn.pgconn.exec_(b"COMMIT")
        assert answer.command_status == b"ROLLBACK"  # the server's own answer
        with pytest.raises(psycopg.OperationalError, match=r"the commit was refused"):
            _committed(answer)
        _committed(conn.pgconn.exec_(b"BEGIN; COMMIT"))  # a real one passes
