"""The append's statements are prepared once per session, and survive what can happen to them:
a session that lost them, a changed result type, statements of psycopg's own on the same
session, notices from the INSERT, a forked child."""

from __future__ import annotations

import os

import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import (
    CANARY,
    Chain,
    _insert_trigger,
    _refused,
    _store,
    _verified,
    verify,
)

from floorguard._chain.chain import AuditChain
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet


def _session_sql(chain: AuditChain, statement: str) -> None:
    """Run ``statement`` on the chain's own kept write session (what a pooler or a shared
    session would do to it between two appends)."""
    conn = _store(chain)._conn
    assert conn is not None
    conn.execute(statement)


# --- the statements prepared on the session -----------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "DEALLOCATE ALL",
        "DISCARD ALL",
        "DEALLOCATE floorguard_open",
        "DEALLOCATE floorguard_append_1",
    ],
)
def test_a_session_that_lost_its_prepared_statements_recovers_on_the_next_append(
    pg: Chain, statement: str
) -> None:
    """The statements prepared when the session opened can be gone (a pooler, or a reset of
    the session): that append is refused (InvalidSqlStatementName), and the next one
    re-prepares them on a new session instead of being refused the same way for the rest of
    the process."""
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))  # seq 0: prepares floorguard_append_1
    chain.append(CANARY, receipt(n=1))  # seq 1: floorguard_append_2
    _session_sql(chain, statement)
    refusals = 0
    for n in range(2, 6):  # seq 2 needs floorguard_append_1 again
        try:
            chain.append(CANARY, receipt(n=n))
        except ChainWriteError as exc:
            assert "\n" not in str(exc)
            refusals += 1
    assert refusals <= 1, f"{refusals} of 4 appends refused after `{statement}`"
    assert _verified(pg) == 6 - refusals


def test_a_prepared_head_whose_result_type_changed_recovers_on_the_next_append(
    pg: Chain,
) -> None:
    """The owner changes a column's type (text -> varchar): the prepared head fails with
    "cached plan must not change result type" on the kept session; the next append must
    re-prepare it, not keep failing on that session for ever."""
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    pg.sql("ALTER TABLE floorguard.records ALTER COLUMN ts TYPE varchar(64)")
    refusals = 0
    for n in range(1, 4):
        try:
            chain.append(CANARY, receipt(n=n))
        except ChainWriteError:
            refusals += 1
    assert refusals <= 1, f"{refusals} of 3 appends refused after the column's type changed"


def test_every_node_count_from_70_appends_goes_through_its_own_prepared_statement(
    pg: Chain,
) -> None:
    chain = pg.chain()
    for n in range(70):
        chain.append(CANARY, receipt(n=n))
    # (Named floorguard_append_<nodes>, or floorguard_next_<nodes>_<edge> when run ahead.)
    counts = {int(name.split(b"_")[2]) for name in _store(chain)._prepared
              if name.startswith((b"floorguard_append_", b"floorguard_next_"))}  # fmt: skip
    assert set(range(1, 8)) <= counts
    assert _verified(pg) == 70
    assert verify(pg).returncode == 0


def test_psycopg_statements_on_the_writer_session_do_not_disturb_the_prepared_ones(
    pg: Chain,
) -> None:
    """A ROLLBACK (a refused append) must not drop the prepared statements, nor may
    psycopg's own prepared statements collide with ours."""
    chain = pg.chain()
    for n in range(8):
        chain.append(CANARY, receipt(n=n))
    pg.sql("INSERT INTO floorguard.tree VALUES (0, 8, '\\x00')")  # the owner's forgery
    _refused(chain)
    pg.sql("DELETE FROM floorguard.tree WHERE level = 0 AND idx = 8")
    chain.append(CANARY, receipt(n=8))  # a refused statement ended the session: a new one
    session = _store(chain)._conn.info.backend_pid  # type: ignore[union-attr]
    for n in range(9, 20):
        chain.append(CANARY, receipt(n=n))
    assert _store(chain)._conn.info.backend_pid == session  # type: ignore[union-attr]
    assert _verified(pg) == 20


def test_notices_and_warnings_from_the_insert_do_not_disturb_the_libpq_calls(
    pg: Chain,
) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    chatter = "RAISE WARNING 'w %', repeat('x', 10000); RAISE NOTICE 'n'; RETURN NEW;"
    _insert_trigger(pg, "chatty", "tree", chatter)
    for n in range(1, 8):
        chain.append(CANARY, receipt(n=n))
    assert _verified(pg) == 8


# --- fork and concurrency ----------------------------------------------------------------------


def test_a_forked_child_prepares_its_own_statements(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for n in range(3, 10):
                chain.append(CANARY, receipt(n=n, who="child"))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    for n in range(10, 14):
        chain.append(CANARY, receipt(n=n))
    assert _verified(pg) == 14
