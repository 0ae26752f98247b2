"""Review of commit 3e27306 (issue 13, PostgreSQL): attacks on the append's three libpq calls.

The append now talks to libpq directly (``pgconn.exec_``, ``prepare``, ``exec_prepared``)
with statements prepared once per session and UTF-8 bytes sent as binary text parameters.
Each test is one attack; a test whose docstring starts with "BREAK:" failed on the code it
was written against. Fixtures: test_chain_postgres's (a server per module, a fresh
initialised database per test).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import (
    CANARY,
    Chain,
    _export,
    _go,
    _start,
    _verified,
    append,
    stalling_proxy,
    verify,
)
from helpers.tree_support import assert_tree_matches_records

from floorguard._time import now_ts
from floorguard.chain import AuditChain
from floorguard.chainstore.postgres import LOCK_STATEMENT, PostgresStore
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet


def _store(chain: AuditChain) -> PostgresStore:
    store = chain.store
    assert isinstance(store, PostgresStore)
    return store


def _session_sql(chain: AuditChain, statement: str) -> None:
    """Run ``statement`` on the chain's own kept write session (what a pooler or a shared
    session would do to it between two appends)."""
    conn = _store(chain)._conn
    assert conn is not None
    conn.execute(statement)


def _refused(chain: AuditChain, **extra: object) -> ChainWriteError:
    with pytest.raises(ChainWriteError) as caught:
        chain.append(CANARY, receipt(**extra))
    message = str(caught.value)
    assert "\n" not in message and "cannot append to the audit chain" in message, message
    return caught.value


# --- receipts whose text stresses the binary text parameters ---------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "caf\u00e9 \u20ac \u4e2d\u6587",  # 2- and 3-byte UTF-8
        "\U0001f600\U00010348",  # non-BMP: 4-byte UTF-8
        "nul \u0000 inside, \\u0000 escaped, and \\\\x00",  # JSON escapes NUL
        "quotes ' \" and a backslash \\ and E'\\x00'",
        "\ufeff\u200b\u2028\u2029",  # BOM, zero-width space, line/paragraph separators
    ],
)
def test_receipt_text_round_trips_byte_for_byte_through_binary_parameters(
    pg: Chain, text: str
) -> None:
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(note=text, n=n))
    lines = "".join(_export(pg)).split("\n")[:-1]  # not splitlines: U+2028 is in a line
    assert [json.loads(line)["receipt"]["note"] for line in lines] == [text] * 3
    done = verify(pg)
    assert done.returncode == 0, done.stderr
    assert assert_tree_matches_records(pg.chain()) == 3
    chain.append(CANARY, receipt(note=text, n=3))  # the head with this text, read back


def test_a_lone_surrogate_in_a_receipt_is_a_chain_write_error_not_a_unicode_error(
    pg: Chain,
) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt())
    with pytest.raises(ChainWriteError):
        chain.append(CANARY, receipt(note="half \ud800 a pair"))
    chain.append(CANARY, receipt())
    assert _verified(pg) == 2


def test_a_receipt_of_a_million_four_byte_characters_is_stored_whole_or_refused(
    pg: Chain,
) -> None:
    """The size limit counts characters: 1 M non-BMP characters are 4 MB of UTF-8 in one
    binary parameter."""
    chain = pg.chain()
    chain.append(CANARY, receipt())
    base = len(json.dumps(receipt(note=""), separators=(",", ":")))
    note = "\U0001f600" * ((1 << 20) - base - 64)
    try:
        chain.append(CANARY, receipt(note=note))
        stored = 3
    except ChainWriteError:
        stored = 2
    chain.append(CANARY, receipt())
    assert _verified(pg) == stored


# --- a client encoding other than UTF-8 --------------------------------------------------------


def test_a_latin1_client_encoding_never_stores_a_record_other_than_the_one_maced(
    pg: Chain,
) -> None:
    """BREAK: with client_encoding=LATIN1 (in the URL, or PGCLIENTENCODING, or ALTER DATABASE
    ... SET client_encoding) the append sends UTF-8 bytes as binary text parameters, which
    the server reads as LATIN1: "caf\u00e9" is stored as "caf\u00c3\u00a9", the append is
    acknowledged, and the record no longer verifies. (psycopg's execute encoded in the
    session's encoding.) The next append reads the head back and decodes LATIN1 bytes as
    UTF-8."""
    chain = AuditChain.from_env(
        pg.env(pg.key_file.parent) | {"FLOORGUARD_CHAIN_URL": pg.url + "&client_encoding=LATIN1"}
    )
    chain.append(CANARY, receipt(note="caf\u00e9"))
    # Whatever the append did, what is stored must be what was MACed.
    assert [json.loads(line)["receipt"]["note"] for line in _export(pg)] == ["caf\u00e9"]
    with contextlib.suppress(ChainWriteError):
        chain.append(CANARY, receipt(note="caf\u00e9 again"))
    _verified(pg)


def test_a_latin1_database_default_client_encoding_keeps_the_chain_verifiable(
    pg: Chain,
) -> None:
    """BREAK: same as above, set by the database's owner (ALTER DATABASE ... SET
    client_encoding): every non-ASCII receipt is stored altered after being acknowledged."""
    pg.sql(f"ALTER DATABASE {pg.database} SET client_encoding = 'LATIN1'")
    chain = pg.chain()
    chain.append(CANARY, receipt(note="\u00fcber"))
    with PostgresStore(pg.url, timeout=5).read() as view:
        assert view is not None
        row = view.row(0)
    assert row is not None and json.loads(row[5])["note"] == "\u00fcber"


def test_a_latin1_host_appending_after_a_utf8_host_raises_only_chain_write_error(
    pg: Chain,
) -> None:
    """BREAK: a UTF-8 host stores "\u00e9"; a host whose session is LATIN1 receives the
    head's receipt in LATIN1 (0xE9) and decodes it as UTF-8 in _open_append: a
    UnicodeDecodeError escapes AuditChain.append (not a ChainWriteError), after BEGIN and
    the lock."""
    pg.chain().append(CANARY, receipt(note="\u00e9"))
    latin1 = AuditChain.from_env(
        pg.env(pg.key_file.parent) | {"FLOORGUARD_CHAIN_URL": pg.url + "&client_encoding=LATIN1"}
    )
    with contextlib.suppress(ChainWriteError):
        latin1.append(CANARY, receipt(note="ascii"))
    pg.chain().append(CANARY, receipt(note="after"))
    _verified(pg)


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
    """BREAK: the statements prepared when the session opened are gone (a pooler, or a
    reset of the session): the append is refused (InvalidSqlStatementName), its ROLLBACK
    succeeds, so the session is kept as it is, still without them, and every later append
    of the process is refused the same way: the process never appends again."""
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
    """BREAK: the owner changes a column's type (text -> varchar): the prepared head now
    fails with "cached plan must not change result type" on the kept session, and keeps
    failing on it for ever (only a new session would re-prepare it)."""
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
    prepared = _store(chain)._prepared
    assert {b"floorguard_append_%d" % k for k in range(1, 8)} <= prepared
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


# --- tampered head and tree rows ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "tamper"),
    [
        # ``head`` records, so leaf n = head is next; its left siblings are the nodes the
        # head query prefetches: n = 3 -> (0, 2), (1, 0); n = 5 -> (0, 4);
        # n = 7 -> (0, 6), (1, 2), (2, 0).
        (3, "UPDATE floorguard.tree SET hash = '\\x00' WHERE level = 0 AND idx = 2"),
        (3, "UPDATE floorguard.tree SET hash = hash || '\\x00' WHERE level = 1 AND idx = 0"),
        (5, "UPDATE floorguard.tree SET hash = '\\x' WHERE level = 0 AND idx = 4"),
        (7, "UPDATE floorguard.tree SET hash = '\\x01' WHERE level = 2 AND idx = 0"),
        (7, "DELETE FROM floorguard.tree WHERE level = 1 AND idx = 2"),
    ],
)
def test_a_wrong_length_or_missing_sibling_node_refuses_the_append(
    pg: Chain, head: int, tamper: str
) -> None:
    chain = pg.chain()
    for n in range(head):
        chain.append(CANARY, receipt(n=n))
    pg.sql(f"ALTER TABLE floorguard.tree DISABLE TRIGGER USER; {tamper}")
    _refused(chain)
    assert pg.sql("SELECT count(*) FROM floorguard.records") == str(head)


def test_a_deleted_head_leaf_is_rebuilt_from_the_records_not_trusted_from_the_tree(
    pg: Chain,
) -> None:
    chain = pg.chain()
    for n in range(7):
        chain.append(CANARY, receipt(n=n))
    pg.sql("ALTER TABLE floorguard.tree DISABLE TRIGGER USER;"
           " DELETE FROM floorguard.tree WHERE level = 0 AND idx = 6")  # fmt: skip
    chain.append(CANARY, receipt(n=7))
    assert _verified(pg) == 8


@pytest.mark.parametrize(
    "extra",
    [
        "(-1, 0, '\\x00')",
        "(-1, 3, decode(repeat('00', 32), 'hex'))",
        "(62, 0, decode(repeat('00', 32), 'hex'))",
        "(1, 9223372036854775807, decode(repeat('00', 32), 'hex'))",
        "(3, -1, decode(repeat('00', 32), 'hex'))",
    ],
)
def test_extra_tree_rows_outside_the_tree_change_nothing(pg: Chain, extra: str) -> None:
    chain = pg.chain()
    for n in range(4):
        chain.append(CANARY, receipt(n=n))
    pg.sql(f"INSERT INTO floorguard.tree VALUES {extra}")  # noqa: S608
    for n in range(4, 9):
        chain.append(CANARY, receipt(n=n))
    pg.sql(f"DELETE FROM floorguard.tree WHERE (level, idx, hash) = {extra}")  # noqa: S608
    assert _verified(pg) == 9


def test_a_tree_the_owner_wiped_is_rebuilt_through_psycopg_inside_the_libpq_transaction(
    pg: Chain,
) -> None:
    """BREAK: no head leaf (a chain from before the tree, or a tree the owner wiped): the
    append falls back to _build_tree, whose nodes go out as _INSERT_NODES, now spelled
    "pg_catalog.unnest(%s::integer[], %s::bigint[], %s::bytea[])": the multi-argument
    unnest is FROM-clause syntax, not a function, so qualified it does not exist
    (UndefinedFunction). Every such append, and AuditChain.ensure_tree, is refused."""
    chain = pg.chain()
    for n in range(11):
        chain.append(CANARY, receipt(n=n))
    pg.sql("ALTER TABLE floorguard.tree DISABLE TRIGGER USER; DELETE FROM floorguard.tree")
    for n in range(11, 16):
        chain.append(CANARY, receipt(n=n))
    assert _verified(pg) == 16


def _insert_trigger(
    pg: Chain, name: str, table: str, body: str, *, when: str = "BEFORE", deferred: bool = False
) -> None:
    """The owner adds a plpgsql trigger on INSERT into floorguard.TABLE running ``body``
    (deferred: a constraint trigger run at COMMIT)."""
    kind = "CONSTRAINT TRIGGER" if deferred else "TRIGGER"
    timing = " DEFERRABLE INITIALLY DEFERRED" if deferred else ""
    pg.sql(
        f"CREATE FUNCTION public.{name}() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN {body} END$$;"
        f" CREATE {kind} {name} {when} INSERT ON floorguard.{table}{timing}"
        f" FOR EACH ROW EXECUTE FUNCTION public.{name}()"
    )


def test_ensure_tree_builds_the_tree_of_a_chain_whose_tree_was_wiped(pg: Chain) -> None:
    """BREAK: AuditChain.ensure_tree goes through the same unnest INSERT (see above)."""
    chain = pg.chain()
    for n in range(5):
        chain.append(CANARY, receipt(n=n))
    pg.sql("ALTER TABLE floorguard.tree DISABLE TRIGGER USER; DELETE FROM floorguard.tree")
    assert chain.ensure_tree() == 5
    assert _verified(pg) == 5


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


def test_threads_sharing_one_chain_and_a_second_chain_in_one_process_stay_linear(
    pg: Chain,
) -> None:
    chains = [pg.chain(), pg.chain()]
    errors: list[BaseException] = []

    def run(chain: AuditChain, tag: int) -> None:
        try:
            for n in range(40):
                chain.append(CANARY, receipt(n=n, tag=tag))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(chains[t % 2], t)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors[:3]
    assert _verified(pg) == 240


# --- the server ends the session -------------------------------------------------------------


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


@pytest.mark.parametrize("pause", [1.5, 2.6], ids=["idle-in-transaction", "watchdog"])
def test_a_pause_between_the_head_and_the_insert_is_refused_then_recovers(
    pg: Chain, pause: float
) -> None:
    """The process stalls after the head was read (1.5 s: the server ends the session for
    idle_in_transaction_session_timeout; 2.6 s: the watchdog cuts the socket while no libpq
    call is running): the INSERT must fail, the append be refused, nothing written."""
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="1")
    chain.append(CANARY, receipt(n=0))
    slow = [True]

    def stalling_clock() -> str:  # read inside the transaction, after the head
        if slow[0]:
            slow[0] = False
            time.sleep(pause)
        return now_ts()

    chain._clock = stalling_clock  # type: ignore[method-assign]
    _refused(chain)
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"
    chain.append(CANARY, receipt(n=1))
    chain.append(CANARY, receipt(n=2))
    assert _verified(pg) == 3


# --- the watchdog cuts each of the three calls -----------------------------------------------


@pytest.mark.parametrize(
    "trigger",
    [b"EXECUTE floorguard_open", b"floorguard_append_", b"COMMIT\x00"],
    ids=["open", "insert", "commit"],
)
def test_a_server_that_goes_silent_in_each_libpq_call_is_refused_then_recovers(
    pg: Chain, trigger: bytes
) -> None:
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    assert append(pg.env(pg.key_file.parent)).returncode == 0
    with stalling_proxy(sock, trigger) as proxy:
        url = f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}"
        chain = AuditChain.from_env(
            pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT="1") | {"FLOORGUARD_CHAIN_URL": url}
        )
        started = time.monotonic()
        error = _refused(chain)
        assert time.monotonic() - started < 10
        assert proxy.stalled.is_set()
        assert "went silent" in str(error) or "FLOORGUARD_CHAIN_TIMEOUT" in str(error), error
        chain.close()
    # the committed-or-not record is decided by the server; the chain must verify
    time.sleep(1.5)  # the stalled session's transaction ends (idle-in-transaction timeout)
    assert append(pg.env(pg.key_file.parent)).returncode == 0
    assert verify(pg).returncode == 0
    assert assert_tree_matches_records(pg.chain()) >= 2


def test_the_same_process_appends_again_after_its_call_was_cut(pg: Chain) -> None:
    """After the watchdog cut the kept session mid-INSERT, the same AuditChain reconnects."""
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    with stalling_proxy(sock, b"floorguard_append_2") as proxy:
        url = f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}"
        chain = AuditChain.from_env(
            pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT="1") | {"FLOORGUARD_CHAIN_URL": url}
        )
        chain.append(CANARY, receipt(n=0))  # floorguard_append_1
        _refused(chain)  # seq 1: floorguard_append_2, swallowed
        assert proxy.stalled.is_set()
        proxy.trigger = b"\xff never sent \xff"  # new connections pass through
        time.sleep(1.5)
        chain.append(CANARY, receipt(n=1))  # seq 1 again, on a new connection
        chain.append(CANARY, receipt(n=2))
        chain.close()
    assert _verified(pg) == 3


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


def test_four_processes_of_a_hundred_appends_make_one_linear_chain(pg: Chain, tmp_path) -> None:
    stop = tmp_path / "stop"
    env = pg.env(tmp_path)
    procs = _start(env, 4, 100, stop, "w")
    _go(procs)
    for proc in procs:
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert _verified(pg) == 400
    assert verify(pg).returncode == 0
