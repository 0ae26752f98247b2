"""An append the server ends, refuses or fails at COMMIT (a terminated session, a statement
timeout, a raising or deferred trigger, a read-only session) is refused as a
ChainWriteError, never acknowledged, and the next append works."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import (
    CANARY,
    Chain,
    _bounded,
    _count,
    _insert_trigger,
    _owner_trigger,
    _refused,
    _store,
    _verified,
    append,
)

from floorguard.chainstore.postgres_schema import LOCK_STATEMENT
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet


def _terminate(pg: Chain, pid: int) -> None:
    pg.server.psql(f"SELECT pg_terminate_backend({pid})")


def test_a_session_terminated_between_appends_reconnects_once(pg: Chain) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    for n in range(1, 4):
        _terminate(pg, _store(chain)._conn.info.backend_pid)  # type: ignore[union-attr]
        time.sleep(0.1)
        chain.append(CANARY, receipt(n=n))
    assert _verified(pg) == 4


def test_a_session_terminated_while_it_waits_for_the_lock_is_refused_then_recovers(
    pg: Chain,
) -> None:
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="3")
    chain.append(CANARY, receipt(n=0))
    pid = _store(chain)._conn.info.backend_pid  # type: ignore[union-attr]
    holder = psycopg.connect(pg.owner_url, autocommit=True)
    holder.execute("BEGIN")
    holder.execute(LOCK_STATEMENT)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(chain.append(CANARY, receipt(n=1)).seq)
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)
    _terminate(pg, pid)
    time.sleep(0.3)
    holder.execute("COMMIT")
    holder.close()
    thread.join(20)
    assert not thread.is_alive()
    assert len(outcome) == 1
    assert outcome[0] == 1 or isinstance(outcome[0], ChainWriteError), outcome
    chain.append(CANARY, receipt(n=2))
    _verified(pg)


def test_a_statement_timeout_in_the_insert_is_refused_and_the_next_append_works(
    pg: Chain,
) -> None:
    """The record's INSERT outlasts statement_timeout (a slow trigger): refused as a
    timeout, nothing written, and the session stays usable."""
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="1")
    chain.append(CANARY, receipt(n=0))
    sleeper = "IF NEW.seq = 1 THEN PERFORM pg_catalog.pg_sleep(3); END IF; RETURN NEW;"
    _insert_trigger(pg, "slow", "records", sleeper)
    error = _refused(chain)
    assert "did not answer within" in str(error)
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"
    pg.sql("DROP TRIGGER slow ON floorguard.records")
    chain.append(CANARY, receipt(n=1))
    assert _verified(pg) == 2


def test_a_trigger_that_raises_in_the_insert_is_refused_and_the_next_append_works(
    pg: Chain,
) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    _insert_trigger(pg, "nope", "tree", "RAISE EXCEPTION 'nope';")
    _refused(chain)
    assert _store(chain)._conn is None  # a session that refused a statement is not kept
    pg.sql("DROP TRIGGER nope ON floorguard.tree")
    chain.append(CANARY, receipt(n=1))
    session = _store(chain)._conn.info.backend_pid  # type: ignore[union-attr]
    chain.append(CANARY, receipt(n=2))
    assert _store(chain)._conn.info.backend_pid == session  # type: ignore[union-attr]
    assert _verified(pg) == 3


def test_a_deferred_constraint_that_fails_at_commit_is_refused_never_acknowledged(
    pg: Chain,
) -> None:
    """COMMIT itself fails (a deferred constraint trigger): the append must be refused."""
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    _insert_trigger(pg, "late", "records", "RAISE EXCEPTION 'refused at commit';",
                    when="AFTER", deferred=True)  # fmt: skip
    _refused(chain)
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"
    pg.sql("DROP TRIGGER late ON floorguard.records")
    chain.append(CANARY, receipt(n=1))
    assert _verified(pg) == 2


def test_a_backend_terminated_between_the_insert_and_the_commit_is_refused_not_hung(
    pg: Chain,
) -> None:
    """The server ends the session after the INSERT's row (pg_terminate_backend of the
    appender's own backend, as an operator's kill or a crash would): the append must be a
    ChainWriteError within the timeout, nothing is committed, the next append works."""
    # A sequence: its nextval is not undone by the rollback the termination causes.
    pg.sql("CREATE SEQUENCE public.once; GRANT USAGE ON SEQUENCE public.once TO PUBLIC")
    _owner_trigger(
        pg,
        "kill_self",
        "IF NEW.seq = 1 AND nextval('public.once') = 1 THEN"
        " PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); END IF;",
    )
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    chain.append(CANARY, receipt(n=0))
    started = time.monotonic()
    with pytest.raises(ChainWriteError) as caught:
        _bounded(lambda: chain.append(CANARY, receipt(n=1)))
    assert time.monotonic() - started < 15
    assert "\n" not in str(caught.value)
    assert _count(pg) == 1
    _bounded(lambda: chain.append(CANARY, receipt(n=2)))
    chain.close()
    assert _verified(pg) == 2


def test_a_deferred_constraint_failing_at_commit_refuses_the_append_and_the_next_one_works(
    pg: Chain,
) -> None:
    """The INSERT succeeds and only the COMMIT fails (a deferred constraint trigger raises):
    the append is a one-line ChainWriteError, the record is not in the chain, and the next
    append on the same AuditChain object (the connection had been in pipeline mode) works."""
    pg.sql("CREATE SEQUENCE public.once; GRANT USAGE ON SEQUENCE public.once TO PUBLIC")
    _owner_trigger(
        pg,
        "refuse_at_commit",
        "IF nextval('public.once') = 1 THEN RAISE EXCEPTION 'deferred refusal'; END IF;",
        constraint=True,
    )
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    with pytest.raises(ChainWriteError, match="deferred refusal") as caught:
        _bounded(lambda: chain.append(CANARY, receipt(n=0)))
    assert "\n" not in str(caught.value)
    assert _count(pg) == 0
    record = _bounded(lambda: chain.append(CANARY, receipt(n=1)))
    assert record.seq == 0
    record = _bounded(lambda: chain.append(CANARY, receipt(n=2)))
    assert record.seq == 1
    chain.close()
    assert _verified(pg) == 2


def test_an_insert_refused_inside_the_pipeline_leaves_the_next_append_working(
    pg: Chain,
) -> None:
    """The INSERT itself fails (a BEFORE trigger raises), so the pipelined COMMIT is
    aborted: one-line ChainWriteError; the same object's next appends work."""
    pg.sql("CREATE SEQUENCE public.once; GRANT USAGE ON SEQUENCE public.once TO PUBLIC")
    _owner_trigger(
        pg,
        "refuse_insert",
        "IF NEW.seq = 1 AND nextval('public.once') = 1 THEN"
        " RAISE EXCEPTION 'insert refusal'; END IF;",
        when="BEFORE INSERT",
    )
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    chain.append(CANARY, receipt(n=0))
    with pytest.raises(ChainWriteError, match="insert refusal") as caught:
        _bounded(lambda: chain.append(CANARY, receipt(n=1)))
    assert "\n" not in str(caught.value)
    for n in range(2, 5):
        _bounded(lambda n=n: chain.append(CANARY, receipt(n=n)))
    chain.close()
    assert _verified(pg) == 4


# --- a read-only session (a hot standby, or default_transaction_read_only) ---------------------


def test_a_read_only_session_refuses_the_append_in_one_line_and_writes_nothing(
    pg: Chain, tmp_path: Path
) -> None:
    """A URL to a read-only server (here the role defaults to read-only transactions, as every
    session on a hot standby is) refuses the spawn with one line, records nothing, and the
    next append after it is writable again succeeds."""
    pg.server.psql(f"ALTER ROLE {pg.appender} SET default_transaction_read_only = on")
    env = pg.env(tmp_path / "h", FLOORGUARD_CHAIN_TIMEOUT="2")
    done = append(env)
    assert done.returncode == 1
    assert "read-only" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "0"
    pg.server.psql(f"ALTER ROLE {pg.appender} RESET default_transaction_read_only")
    assert append(env).returncode == 0


@pytest.mark.parametrize("table", ["records", "tree"])
def test_a_trigger_that_drops_the_rows_an_append_writes_refuses_the_append(
    pg: Chain, table: str
) -> None:
    # The owner (or a DBA) can add a trigger that silently drops inserted rows: the append
    # must see that nothing was stored, not acknowledge a decision with no record of it.
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    pg.sql(
        "CREATE FUNCTION public.swallow() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN RETURN NULL; END $$;"
        " GRANT EXECUTE ON FUNCTION public.swallow() TO PUBLIC;"
        f" CREATE TRIGGER zz_swallow BEFORE INSERT ON floorguard.{table}"
        " FOR EACH ROW EXECUTE FUNCTION public.swallow()"
    )
    with pytest.raises(ChainWriteError, match="not stored"):
        pg.chain().append(CANARY, receipt(n=1))
    assert _count(pg) == 1
    pg.sql(f"DROP TRIGGER zz_swallow ON floorguard.{table}")
    pg.chain().append(CANARY, receipt(n=2))
    assert _verified(pg) == 2
