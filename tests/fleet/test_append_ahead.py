"""A host that wrote the chain's head appends the next record in one round trip (append_next),
on what it knows from its own append, and the server checks that knowledge.

- Once a process's append finds its own last record the head (the chain is quiet), its next
  ones are one call of append_next each: no open_append.
- When the chain moved on (another host appended), or the tree's right edge is not the one
  the host remembers, or its estimated stamp does not hold, nothing is written and the
  append runs the ordinary way, which refuses a rollback or a fork as it always did.
- A process of a host whose other process saw more of the chain never appends ahead onto
  a chain rolled back to what it alone saw; nor after a head whose mac was replaced (the
  ordinary way records it as unverified).
- append_next refuses what append_record refuses; its stamp may trail the transaction's
  start by at most AHEAD_SLACK_MS; a wrong right edge is a serialization failure.
- A chain whose schema predates append_next takes appends the ordinary way.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import CANARY, Chain, _filled, _next, _verified, right_edge

from floorguard._chain.chain import AuditChain
from floorguard._chain.chain_key import load_key
from floorguard._crypto import merkle
from floorguard.chainstore.interface import Node, Row
from floorguard.chainstore.postgres_schema import AHEAD_SLACK_MS, appender_role
from floorguard.errors import ChainRollbackError, ChainWriteError

pytestmark = pytest.mark.fleet

APPEND_NEXT_SQL = (
    "SELECT floorguard_api.append_next(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


@pytest.fixture
def counted(pg: Chain) -> Chain:
    """The chain's database with PostgreSQL counting calls of its functions."""
    pg.server.psql(f"ALTER DATABASE {pg.database} SET track_functions = 'pl'")
    return pg


def _calls(pg: Chain) -> dict[str, int]:
    """The calls of each function, once every other session of the database has ended and
    the counts stand still (a session's counts reach the statistics as it exits, after its
    client has closed it)."""
    others = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
    )
    deadline = time.monotonic() + 30
    while pg.server.psql(others, database=pg.database) != "0" and time.monotonic() < deadline:
        time.sleep(0.05)
    counts, previous = _counts(pg), None
    while counts != previous and time.monotonic() < deadline:
        time.sleep(0.2)
        counts, previous = _counts(pg), counts
    return counts


def _counts(pg: Chain) -> dict[str, int]:
    found = pg.server.psql(
        "SELECT string_agg(funcname || '=' || calls, ',') FROM pg_stat_user_functions",
        database=pg.database,
    )
    return {name: int(n) for name, n in (item.split("=") for item in found.split(",") if item)}


def _host(pg: Chain, home: Path) -> AuditChain:
    return AuditChain.from_env(pg.env(home))


def _head_seq(pg: Chain) -> int:
    return int(pg.sql("SELECT max(seq) FROM floorguard.records"))


def test_a_process_appends_after_its_own_append_in_one_call(counted: Chain, tmp_path: Path) -> None:
    chain = _host(counted, tmp_path / "host")
    records = [chain.append(CANARY, receipt(n=n)) for n in range(6)]
    chain.close()  # (a session's counts reach the statistics when it ends)
    assert [r.seq for r in records] == list(range(6))
    assert [r.ts for r in records] == sorted(r.ts for r in records)
    calls = _calls(counted)
    # The first two read the head; the second finds the chain quiet (its head is the first).
    assert calls.get("open_append") == 2, calls
    assert calls.get("append_next") == 4, calls
    assert _verified(counted) == 6


def _sequential_scans(pg: Chain) -> dict[str, int]:
    found = pg.server.psql(
        "SELECT string_agg(relname || '=' || seq_scan, ',') FROM pg_stat_user_tables"
        " WHERE schemaname = 'floorguard'",
        database=pg.database,
    )
    return {name: int(n) for name, n in (item.split("=") for item in found.split(",") if item)}


def test_appends_read_the_tree_and_the_records_by_index_only(pg: Chain, tmp_path: Path) -> None:
    # A small tree is where the planner prefers reading a table whole (a hash join against
    # the nodes a host sent): one such read per append would grow with the chain.
    chain = _host(pg, tmp_path / "host")
    chain.append(CANARY, receipt(n=0))
    chain.close()  # (a session's counts reach the statistics when it ends)
    before = _sequential_scans(pg)
    chain = _host(pg, tmp_path / "host")
    for n in range(1, 40):
        chain.append(CANARY, receipt(n=n))
    chain.close()
    after = _sequential_scans(pg)
    assert after["tree"] == before["tree"], (before, after)
    assert after["records"] == before["records"], (before, after)
    assert _verified(pg) == 40


def test_an_append_ahead_never_waits_for_the_lock_the_ordinary_way_waits_its_turn(
    counted: Chain, tmp_path: Path
) -> None:
    chain = _host(counted, tmp_path / "host")
    for n in range(3):
        chain.append(CANARY, receipt(n=n))  # the third runs ahead
    with psycopg.connect(counted.url) as other:  # another append holds the chain's lock
        other.execute("SELECT * FROM floorguard_api.open_append(NULL)")
        release = threading.Timer(0.5, other.rollback)
        release.start()
        try:
            record = chain.append(CANARY, receipt(n=3))
        finally:
            release.join()
    chain.close()
    assert record.seq == 3
    calls = _calls(counted)
    # append_next was refused at once (lock_not_available: a failed call is not counted),
    # and the ordinary way (the host's third open_append; the other session's is the
    # fourth) waited in take_lock. An append_next that waited would count 2, opens 3.
    assert calls.get("append_next") == 1, calls
    assert calls.get("open_append") == 4 and calls.get("take_lock") == 1, calls
    assert _verified(counted) == 4


def test_hosts_taking_turns_write_every_record_once(counted: Chain, tmp_path: Path) -> None:
    a, b = _host(counted, tmp_path / "a"), _host(counted, tmp_path / "b")
    seqs = []
    for n in range(5):
        seqs.append(a.append(CANARY, receipt(n=n)).seq)
        seqs.append(b.append(CANARY, receipt(n=100 + n)).seq)
    # No append ran ahead into the other host's records: none was tried.
    seqs.append(b.append(CANARY, receipt(n=200)).seq)  # finds the chain quiet
    seqs.append(b.append(CANARY, receipt(n=201)).seq)  # so this one runs ahead
    a.close()
    b.close()
    assert seqs == list(range(12))
    calls = _calls(counted)
    assert calls.get("append_next") == 1 and calls.get("open_append") == 11, calls
    assert _verified(counted) == 12


def _remembered(chain: AuditChain) -> tuple[int, bytes]:
    """The one tree this host's view remembers: its size and root."""
    (view,) = chain.views.load().values()  # type: ignore[union-attr]
    return view.size, view.root


def _stored_root(chain: AuditChain, size: int) -> bytes:
    with chain.tree_snapshot() as snap:
        return merkle.root(size, snap.subtree)


def _rollbacks(pg: Chain, *, at_least: int = 0) -> int:
    """Transactions of the chain's database rolled back, as the statistics have them once
    they reach ``at_least`` (a closed session's counts arrive when its backend exits), or
    after 10 s."""
    waited_until = time.monotonic() + 10
    while True:
        found = int(
            pg.server.psql(
                "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()",
                database=pg.database,
            )
        )
        if found >= at_least or time.monotonic() > waited_until:
            return found
        time.sleep(0.05)


def test_after_an_append_ahead_that_missed_the_host_remembers_the_tree_it_then_wrote(
    pg: Chain, tmp_path: Path
) -> None:
    # The host encodes what it will remember while the server works on the append ahead;
    # the server refuses that one (another host appended), and the append the ordinary way
    # writes another record: the view holds that record's tree, never the one encoded.
    a, b = _host(pg, tmp_path / "a"), _host(pg, tmp_path / "b")
    a.append(CANARY, receipt(n=0))
    a.append(CANARY, receipt(n=1))  # finds its own head: the next one is tried ahead
    b.append(CANARY, receipt(n=2))
    b.close()
    rolled_back = _rollbacks(pg)
    assert a.append(CANARY, receipt(n=3)).seq == 3
    assert _remembered(a) == (4, _stored_root(a, 4))
    a.close()
    # The append ahead was tried, and refused by the server (its transaction rolled back).
    assert _rollbacks(pg, at_least=rolled_back + 1) > rolled_back
    assert _verified(pg) == 4


def test_a_rollback_to_the_head_one_process_wrote_is_refused_when_another_saw_more(
    pg: Chain, tmp_path: Path
) -> None:
    home = tmp_path / "host"
    first, second = _host(pg, home), _host(pg, home)  # two processes of one host
    _filled(pg, 3)
    first.append(CANARY, receipt(n=1))
    first.append(CANARY, receipt(n=2))  # seq 4, on a quiet chain: `first` may run ahead
    second.append(CANARY, receipt(n=3))
    second.append(CANARY, receipt(n=4))  # the host has seen 7 records
    # The owner takes the chain back to the head `first` wrote (a restore, a rewrite).
    pg.sql("DELETE FROM floorguard.tree WHERE level = 0 AND idx >= 5 OR level = 1 AND idx = 2")
    pg.sql("DELETE FROM floorguard.records WHERE seq >= 5")
    assert _head_seq(pg) == 4

    with pytest.raises(ChainRollbackError, match="rollback"):
        first.append(CANARY, receipt(n=5))
    assert _head_seq(pg) == 4  # nothing was written
    refusals = (home / "floorguard" / "chain-refusals.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in refusals] == ["rollback"]


def test_a_changed_node_on_the_trees_right_edge_refuses_the_next_append_as_a_fork(
    pg: Chain, tmp_path: Path
) -> None:
    chain = _host(pg, tmp_path / "host")
    for n in range(6):  # a tree of 6 leaves: its right edge is nodes (2, 0) and (1, 2)
        chain.append(CANARY, receipt(n=n))
    # The next leaf (6) completes no subtree: no node it is hashed with is (2, 0).
    pg.sql("UPDATE floorguard.tree SET hash = '\\x" + "00" * 32 + "' WHERE level = 2 AND idx = 0")
    with pytest.raises(ChainRollbackError, match="fork"):
        chain.append(CANARY, receipt(n=6))
    assert _head_seq(pg) == 5


def test_a_replaced_mac_on_the_record_a_process_wrote_is_recorded_as_an_unverified_head(
    pg: Chain, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The owner swaps the mac of the head this process wrote, keeping its tree rows: the
    # next record's prev does not cover a mac, and its leaf is unchanged.
    home = tmp_path / "host"
    chain = _host(pg, home)
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    pg.sql("UPDATE floorguard.records SET mac = repeat('0', 64) WHERE seq = 2")

    assert chain.append(CANARY, receipt(n=3)).seq == 3
    assert "seq 2) does not verify" in caplog.text  # recorded, never silently
    refusals = (home / "floorguard" / "chain-refusals.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in refusals] == ["unverified-head"]


def test_an_append_next_refused_for_another_reason_refuses_the_append_and_writes_nothing(
    pg: Chain, tmp_path: Path
) -> None:
    chain = _host(pg, tmp_path / "host")
    for n in range(3):
        chain.append(CANARY, receipt(n=n))  # the third runs ahead
    pg.sql(
        "REVOKE EXECUTE ON FUNCTION floorguard_api.append_next(bigint, text, text, text, text,"
        " text, text, text, integer[], bigint[], bytea[], integer[], bigint[], bytea[])"
        f" FROM {appender_role(pg.database)}"
    )
    with pytest.raises(ChainWriteError, match="lacks a privilege"):
        chain.append(CANARY, receipt(n=3))
    assert _head_seq(pg) == 2
    # What the host encoded for the record while the server refused it is not remembered.
    assert _remembered(chain) == (3, _stored_root(chain, 3))


def test_a_chain_initialised_before_append_next_takes_appends_the_ordinary_way(
    counted: Chain, tmp_path: Path
) -> None:
    _filled(counted, 1)
    counted.sql(
        "DROP FUNCTION floorguard_api.append_next(bigint, text, text, text, text, text, text, text,"
        " integer[], bigint[], bytea[], integer[], bigint[], bytea[])"
    )
    chain = _host(counted, tmp_path / "host")
    assert [chain.append(CANARY, receipt(n=n)).seq for n in range(4)] == [1, 2, 3, 4]
    chain.close()
    calls = _calls(counted)
    assert calls.get("open_append", 0) >= 4 and "append_next" not in calls, calls
    assert _verified(counted) == 5


# --- append_next itself, called by hand -------------------------------------------------------


@pytest.fixture
def appender(pg: Chain) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.url) as conn:
        yield conn


def _call_next(
    conn: psycopg.Connection[Any], record: Row, nodes: list[Node], edge: list[Node]
) -> Any:
    def columns(items: list[Node]) -> tuple[list[Any], ...]:
        return ([n[0] for n in items], [n[1] for n in items], [n[2] for n in items])

    found = conn.execute(APPEND_NEXT_SQL, (*record, *columns(nodes), *columns(edge))).fetchone()
    return None if found is None else found[0]


def _began(conn: psycopg.Connection[Any], shift_ms: int) -> str:
    """The transaction's start, shifted by ``shift_ms``, as the chain writes a time."""
    found = conn.execute(
        "SELECT to_char((transaction_timestamp() + %s * interval '1 millisecond')"
        """ AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')""",
        (shift_ms,),
    ).fetchone()
    assert found is not None
    return str(found[0])


def test_append_next_writes_the_honest_next_record_and_returns_the_servers_clock(
    pg: Chain, appender: psycopg.Connection[Any]
) -> None:
    _filled(pg, 5)
    record, nodes = _next(appender, load_key(pg.key_file))
    clock = _call_next(appender, record, nodes, right_edge(appender, 5))
    appender.commit()
    assert isinstance(clock, str) and clock >= record[1]
    assert _verified(pg) == 6


def test_append_next_takes_a_stamp_trailing_its_transactions_start_within_the_slack(
    pg: Chain, appender: psycopg.Connection[Any]
) -> None:
    _filled(pg, 2)
    time.sleep(0.5)  # the head's stamp is older than the stamps tried below
    key = load_key(pg.key_file)
    record, nodes = _next(appender, key, ts=_began(appender, -(AHEAD_SLACK_MS + 500)))
    with pytest.raises(psycopg.IntegrityError, match="not between"):
        _call_next(appender, record, nodes, right_edge(appender, 2))
    appender.rollback()
    record, nodes = _next(appender, key, ts=_began(appender, -(AHEAD_SLACK_MS // 2)))
    _call_next(appender, record, nodes, right_edge(appender, 2))
    appender.commit()
    assert _verified(pg) == 3


def test_append_next_refuses_a_right_edge_the_tree_does_not_hold(
    pg: Chain, appender: psycopg.Connection[Any]
) -> None:
    _filled(pg, 3)
    record, nodes = _next(appender, load_key(pg.key_file))
    edge = right_edge(appender, 3)
    forged = [(level, index, hashlib.sha256(digest).digest()) for level, index, digest in edge]
    with pytest.raises(psycopg.errors.SerializationFailure, match="not the one this host"):
        _call_next(appender, record, nodes, forged[:1] + edge[1:])
    appender.rollback()
    assert _head_seq(pg) == 2


def test_append_next_refuses_what_append_record_refuses(
    pg: Chain, appender: psycopg.Connection[Any]
) -> None:
    _filled(pg, 2)
    spaced = json.dumps({"kind": CANARY, "schema_version": 1, "ts": "2026-12-03T00:00:00Z"})
    record, nodes = _next(
        appender,
        load_key(pg.key_file),
        receipt=spaced,
        receipt_id="sha256:" + hashlib.sha256(spaced.encode()).hexdigest(),
    )
    with pytest.raises(psycopg.IntegrityError, match="canonical form"):
        _call_next(appender, record, nodes, right_edge(appender, 2))
    appender.rollback()
    assert _head_seq(pg) == 1
