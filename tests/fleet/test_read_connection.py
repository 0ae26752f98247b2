"""A process keeps one read connection between reads of a shared chain (a proof costs a few
queries; a new session costs more than all of them). What may happen to a kept connection
must not change what a read sees or whether it works: the server ending the session, a
read left part way, a second read meanwhile, a fork."""

from __future__ import annotations

import os
import threading

import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import CANARY, Chain, _verified

from floorguard._chain.chain import AuditChain
from floorguard.errors import ChainError

pytestmark = pytest.mark.fleet


def _size(chain: AuditChain) -> int:
    with chain.tree_snapshot() as snapshot:
        return snapshot.size


def _end_sessions(pg: Chain) -> int:
    """End every session of the appender's role, as a restart or an operator would."""
    query = (
        "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity"
        " WHERE usename = '{}') AS sessions"
    )
    ended = pg.server.psql(query.format(pg.appender))
    return int(ended.strip())


def test_reads_work_after_the_server_ended_the_kept_session(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    assert _size(chain) == 3
    assert _end_sessions(pg) >= 1  # (the kept read session among them)
    assert _size(chain) == 3
    assert chain.head().seq == 2  # type: ignore[union-attr]
    chain.append(CANARY, receipt(n=3))
    assert _size(chain) == 4


def test_each_read_sees_the_chain_as_it_is_then(pg: Chain) -> None:
    reader, writer = pg.chain(), pg.chain()
    writer.append(CANARY, receipt(n=0))
    assert _size(reader) == 1
    for n in range(1, 4):
        writer.append(CANARY, receipt(n=n))
        # A new snapshot each read: the kept session holds no transaction between them.
        assert _size(reader) == n + 1
        assert [record.seq for record in reader.records()] == list(range(n + 1))


def test_an_export_left_part_way_does_not_spoil_later_reads(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(5):
        chain.append(CANARY, receipt(n=n))
    left = chain.export_lines()
    assert next(left)  # its read (and a server-side cursor) stays open
    # A read meanwhile has a session of its own.
    assert _size(chain) == 5
    left.close()  # the abandoned export's read ends
    for _ in range(3):
        assert len(list(chain.export_lines())) == 5
        assert _size(chain) == 5


def test_reads_in_several_threads_at_once_each_see_the_whole_chain(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(20):
        chain.append(CANARY, receipt(n=n))
    seen: list[int] = []
    failed: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(10):
                seen.append(len(list(chain.export_lines())))
        except BaseException as exc:  # reported below, in the test's own thread
            failed.append(exc)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failed, failed
    assert seen == [20] * 40


def test_a_forked_child_reads_on_its_own_session_and_the_parent_reads_on(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    assert _size(chain) == 3  # the parent's read session is kept
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if _size(chain) == 3:
                chain.append(CANARY, receipt(n=3, who="child"))
                code = 0 if _size(chain) == 4 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _size(chain) == 4
    assert _verified(pg) == 4


def test_a_read_of_a_chain_whose_server_is_gone_is_still_refused(pg: Chain) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    assert _size(chain) == 1
    pg.sql(f"ALTER ROLE {pg.appender} NOLOGIN")
    try:
        _end_sessions(pg)
        # The kept session is gone and no new one may start: one line, no retry loop.
        with pytest.raises(ChainError, match="cannot read the audit chain"):
            _size(chain)
    finally:
        pg.sql(f"ALTER ROLE {pg.appender} LOGIN")
    assert _size(chain) == 1


def test_chain_objects_let_go_close_their_sessions(pg: Chain) -> None:
    import gc

    def open_descriptors() -> int:
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    pg.chain().append(CANARY, receipt(n=0))
    before = open_descriptors()
    for n in range(1, 21):
        chain = pg.chain()
        chain.append(CANARY, receipt(n=n))
        assert _size(chain) == n + 1
    del chain
    assert open_descriptors() == before
