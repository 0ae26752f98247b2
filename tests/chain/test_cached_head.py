"""An append to a quiet local chain runs on what this process's last append wrote (the head,
the tree's right edge), checked under the write lock by SQLite's data version (which any
other connection's commit changes); whatever else wrote the file since is noticed, and the
append is then judged on the file as it is, exactly as an append without that knowledge
would be.

Each test keeps one long-lived chain object (the process's own, as the gate keeps one) and
changes the file under it between two of its appends: another process appends, records are
removed under the very head it remembers, the file is replaced by an older copy, a tree
node is rewritten.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.chain_support import CANARY, export_lines, receipt
from helpers.tree_support import assert_tree_matches_records

from floorguard._chain.chain import AuditChain, record_digest
from floorguard._proofs.slice_verify import verify_slice
from floorguard.errors import ChainRollbackError, ChainWriteError

APPEND_ONE = textwrap.dedent(
    """
    import sys
    from floorguard._chain.chain import AuditChain
    record = AuditChain.from_env().append(
        "adapter.canary_receipt",
        {"kind": "adapter.canary_receipt", "schema_version": 1, "ts": "2026-12-03T07:00:00Z",
         "by": "another process"},
    )
    print(record.seq)
    """
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "floorguard"
    monkeypatch.setenv("FLOORGUARD_HOME", str(folder))
    for name in ("FLOORGUARD_CHAIN_URL", "FLOORGUARD_CHAIN_KEY_FILE", "FLOORGUARD_HOST_KEY_FILE",
                 "FLOORGUARD_HOST_KEYS"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return folder


def _chain(count: int) -> AuditChain:
    """This process's chain (with the host's view of it), after ``count`` appends."""
    chain = AuditChain.from_env()
    for n in range(count):
        chain.append(CANARY, receipt(n=n))
    return chain


def _statements(chain: AuditChain) -> list[str]:
    """The statements of the chain's next append (traced on its write connection), the
    tree's nodes as one: one prepared INSERT, run once a node (each run is traced)."""
    conn = chain.store._conn  # type: ignore[attr-defined]
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        chain.append(CANARY, receipt(n="traced"))
    finally:
        conn.set_trace_callback(None)
    statements: list[str] = []
    for text in seen:
        if text.startswith("--"):  # (nested: the pragma)
            continue
        if not (text.startswith("INSERT INTO tree") and statements[-1].startswith(text[:16])):
            statements.append(text)
    return statements


def _count(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    finally:
        conn.close()


def _assert_whole(chain: AuditChain, home: Path) -> None:
    report = verify_slice(export_lines(chain), key=bytes.fromhex((home / "chain.key").read_text()))
    assert report.intact, report.integrity_errors[:3]
    assert_tree_matches_records(chain)


def test_an_append_to_a_quiet_chain_reads_only_the_data_version(home: Path) -> None:
    chain = _chain(3)
    statements = _statements(chain)
    assert len(statements) == 5, statements
    assert statements[0] == "BEGIN IMMEDIATE" and statements[-1] == "COMMIT"
    assert statements[1] == "PRAGMA data_version"
    assert statements[2].startswith("INSERT INTO records")
    assert statements[3].startswith("INSERT INTO tree")
    _assert_whole(chain, home)


def test_the_kept_edge_is_the_trees_own_and_a_kept_node_that_is_no_hash_is_never_used() -> None:
    # The run-ahead append takes the tree's right edge from the nodes its last append kept,
    # in one lookup each: the same hashes CompactRange reads node by node, and anything
    # there that is not a 32-byte hash is no edge (the append then reads the file).
    from floorguard._crypto import merkle
    from floorguard.chainstore.interface import AheadMissed, edge_of

    built = merkle.CompactRange()
    nodes: dict[tuple[int, int], bytes] = {}
    for n in range(11):
        nodes.update(((level, index), digest) for level, index, digest in
                     built.append(merkle.leaf_hash(bytes([n]))))  # fmt: skip
    assert edge_of(11, nodes.get) == list(built.hashes())
    assert tuple(edge_of(11, nodes.get)) == merkle.CompactRange.of(11, lambda *k: nodes[k]).hashes()
    for bad in (None, b"\x01" * 31, "ab" * 16, bytearray(32)):
        damaged: dict[tuple[int, int], object] = {**nodes, (1, 4): bad}
        with pytest.raises(AheadMissed):
            edge_of(11, damaged.get)  # type: ignore[arg-type]


def test_a_kept_edge_node_damaged_in_memory_is_not_hashed_onward(home: Path) -> None:
    chain = _chain(6)
    known = chain.store._known  # type: ignore[attr-defined]
    assert known is not None
    # The tree of 6 leaves: its edge is (2, 0) and (1, 2); the next leaf is hashed with both.
    known.nodes[(1, 2)] = b"\x00" * 5
    assert chain.append(CANARY, receipt(n="after")).seq == 6
    _assert_whole(chain, home)


def test_an_append_by_another_process_between_two_appends_is_linked_after_it(
    home: Path,
) -> None:
    chain = _chain(3)
    other = subprocess.run([sys.executable, "-c", APPEND_ONE], capture_output=True, text=True,
                           timeout=120, check=False)  # fmt: skip
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() == "3"
    record = chain.append(CANARY, receipt(n="after"))
    assert record.seq == 4
    lines = list(chain.export_lines())
    assert '"by":"another process"' in lines[3]
    # Linked to the other process's record, not to the one this process remembered.
    with sqlite3.connect(home / "chain.sqlite3") as conn:
        (prev,) = conn.execute("SELECT prev FROM records WHERE seq = 4").fetchone()
    assert prev == _digest_of(chain, 3)
    _assert_whole(chain, home)
    # Quiet again: the append after it runs on what this one wrote.
    assert len(_statements(chain)) == 5
    _assert_whole(chain, home)


def test_two_chain_objects_without_a_host_view_interleaving_appends_build_one_chain(
    tmp_path: Path,
) -> None:
    # No host view to notice the other writer: the data version and the head alone must.
    first = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    second = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    seqs = []
    for n in range(4):
        seqs.append(first.append(CANARY, receipt(n=n)).seq)
        seqs.append(first.append(CANARY, receipt(n=n)).seq)
        seqs.append(second.append(CANARY, receipt(n=n)).seq)
    assert seqs == list(range(12))
    report = verify_slice(export_lines(first), key=bytes.fromhex(
        (tmp_path / "chain.key").read_text()))  # fmt: skip
    assert report.intact, report.integrity_errors[:3]
    assert_tree_matches_records(first)


@pytest.mark.parametrize("same_process", [True, False], ids=["this-process", "another-process"])
def test_a_head_rewritten_by_another_connection_between_two_appends_is_checked_not_trusted(
    home: Path, same_process: bool
) -> None:
    # The head this process kept is not read back under the lock: the data version alone
    # says whether anyone else committed. A rewrite of that very head (its MAC) by another
    # connection, of this process or another, is such a commit: the head is read and
    # checked against the key, and the append refused.
    chain = _chain(3)
    rewrite = "UPDATE records SET mac = ? WHERE seq = 2"
    if same_process:
        with sqlite3.connect(home / "chain.sqlite3") as conn:
            conn.execute(rewrite, ("0" * 64,))
    else:
        code = f"import sqlite3; c = sqlite3.connect({str(home / 'chain.sqlite3')!r}); "
        code += f"c.execute({rewrite!r}, ('0' * 64,)); c.commit()"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    with pytest.raises(ChainWriteError, match=r"last record \(seq 2\) does not verify"):
        chain.append(CANARY, receipt(n="refused"))
    assert _count(home / "chain.sqlite3") == 3


def _digest_of(chain: AuditChain, seq: int) -> str:
    record = next(r for r in chain.records() if r.seq == seq)
    return record_digest(record.body_bytes())


def test_records_removed_under_the_remembered_head_refuse_the_append_as_a_rollback(
    home: Path,
) -> None:
    # The head this process remembers (seq 2) is the head again once the records another
    # writer of this host appended after it are removed: the file holds exactly what this
    # process wrote, yet the host has seen more.
    chain = _chain(3)
    neighbour = AuditChain.from_env()
    neighbour.append(CANARY, receipt(n="neighbour"))
    neighbour.append(CANARY, receipt(n="neighbour"))
    neighbour.close()
    db = home / "chain.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM records WHERE seq >= 3")
        conn.execute("DELETE FROM tree WHERE ((idx + 1) << level) > 3")
    with pytest.raises(ChainRollbackError, match="rollback"):
        chain.append(CANARY, receipt(n="refused"))
    assert _count(db) == 3
    assert '"event":"rollback"' in (home / "chain-refusals.jsonl").read_text()


def test_a_chain_file_replaced_by_an_older_copy_under_the_remembered_head_is_refused(
    home: Path, tmp_path: Path
) -> None:
    chain = _chain(3)
    backup = tmp_path / "backup.sqlite3"
    with sqlite3.connect(home / "chain.sqlite3") as source, sqlite3.connect(backup) as copy:
        source.backup(copy)
    chain.append(CANARY, receipt(n=3))
    chain.append(CANARY, receipt(n=4))
    os.replace(backup, home / "chain.sqlite3")
    for companion in ("-wal", "-shm"):
        (home / f"chain.sqlite3{companion}").unlink(missing_ok=True)
    with pytest.raises(ChainRollbackError, match="rollback"):
        chain.append(CANARY, receipt(n="refused"))
    assert _count(home / "chain.sqlite3") == 3


def test_a_chain_file_replaced_by_a_copy_of_itself_is_appended_to_as_it_is(
    home: Path, tmp_path: Path
) -> None:
    chain = _chain(3)
    backup = tmp_path / "same.sqlite3"
    with sqlite3.connect(home / "chain.sqlite3") as source, sqlite3.connect(backup) as copy:
        source.backup(copy)
    os.replace(backup, home / "chain.sqlite3")
    for companion in ("-wal", "-shm"):
        (home / f"chain.sqlite3{companion}").unlink(missing_ok=True)
    assert chain.append(CANARY, receipt(n=3)).seq == 3
    _assert_whole(chain, home)


def test_a_tree_node_rewritten_under_the_remembered_head_is_refused_as_a_fork(
    home: Path,
) -> None:
    chain = _chain(6)  # the right edge: subtrees (2, 0) of records 0-3 and (1, 2) of 4-5
    with sqlite3.connect(home / "chain.sqlite3") as conn:
        conn.execute("UPDATE tree SET hash = ? WHERE level = 2 AND idx = 0", (b"\x07" * 32,))
    with pytest.raises(ChainRollbackError, match="fork"):
        chain.append(CANARY, receipt(n="refused"))
    assert _count(home / "chain.sqlite3") == 6


# --- one file, one log: what the kept connection rests on -------------------------------------
# SQLite keeps a database's write-ahead log and its index beside the name it opened
# (``chain.sqlite3-wal``, ``-shm``). A second name for the same file (a hard link), or those
# two files removed or replaced under a connection that has them open, gives two logs for one
# database: each writer appends on its own head, and one's records are lost when the other's
# log is checkpointed. Both are refused, by name, before anything is written.


def _no_view_chain(folder: Path, count: int) -> AuditChain:
    """A chain object without a host view (the library's own AuditChain(path, key)): the
    store alone must notice."""
    chain = AuditChain(folder / "chain.sqlite3", folder / "chain.key")
    for n in range(count):
        chain.append(CANARY, receipt(n=n))
    return chain


def test_a_chain_file_with_a_second_hard_link_is_refused_under_either_name(
    tmp_path: Path,
) -> None:
    _no_view_chain(tmp_path, 2).close()
    other = tmp_path / "elsewhere"
    other.mkdir()
    os.link(tmp_path / "chain.sqlite3", other / "chain.sqlite3")
    os.link(tmp_path / "chain.key", other / "chain.key")
    for folder in (tmp_path, other):
        chain = AuditChain(folder / "chain.sqlite3", folder / "chain.key")
        with pytest.raises(ChainWriteError, match="2 hard links"):
            chain.append(CANARY, receipt(n="refused"))
        chain.close()
    assert _count(tmp_path / "chain.sqlite3") == 2


def test_a_hard_link_made_between_two_appends_refuses_the_next(tmp_path: Path) -> None:
    chain = _no_view_chain(tmp_path, 3)
    os.link(tmp_path / "chain.sqlite3", tmp_path / "copy.sqlite3")
    with pytest.raises(ChainWriteError, match="hard links"):
        chain.append(CANARY, receipt(n="refused"))
    (tmp_path / "copy.sqlite3").unlink()
    assert chain.append(CANARY, receipt(n=3)).seq == 3  # one name again: appended
    chain.close()
    assert _count(tmp_path / "chain.sqlite3") == 4


def _checkpoint_and_remove(db: Path, *companions: str) -> None:
    """What a clean-up of 'stale' SQLite files does: the log folded into the file, then the
    log and its index deleted, while a process still has them open."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    for companion in companions:
        Path(f"{db}{companion}").unlink()


@pytest.mark.parametrize("companions", [("-wal", "-shm"), ("-wal",), ("-shm",)])
def test_the_log_removed_under_a_kept_connection_refuses_the_next_append(
    tmp_path: Path, companions: tuple[str, ...]
) -> None:
    chain = _no_view_chain(tmp_path, 3)
    _checkpoint_and_remove(tmp_path / "chain.sqlite3", *companions)
    for _ in range(2):  # every append from then on, not only the first
        with pytest.raises(ChainWriteError, match="removed or replaced") as refused:
            chain.append(CANARY, receipt(n="refused"))
        assert companions[0] in str(refused.value)


def test_the_log_cut_in_place_under_a_kept_connection_refuses_every_later_append(
    tmp_path: Path,
) -> None:
    # The same file, emptied (`: > chain.sqlite3-wal`): no identity changes, and the kept
    # connection would go on reading its own records from its index, over a file that no
    # longer holds them.
    chain = _no_view_chain(tmp_path, 3)
    os.truncate(tmp_path / "chain.sqlite3-wal", 0)
    for _ in range(2):
        with pytest.raises(ChainWriteError, match="was cut while this process had it open"):
            chain.append(CANARY, receipt(n="refused"))


def test_another_process_reading_a_log_cut_in_place_is_told_so(tmp_path: Path) -> None:
    chain = _no_view_chain(tmp_path, 3)
    os.truncate(tmp_path / "chain.sqlite3-wal", 0)
    read = (
        "import sys\n"
        "from floorguard._chain.chain import AuditChain\n"
        "with AuditChain(sys.argv[1], sys.argv[2]).tree_snapshot() as snap:\n"
        "    print(snap.size)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", read, str(tmp_path / "chain.sqlite3"), str(tmp_path / "chain.key")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "it was cut while the chain was in use" in done.stderr, done.stderr
    chain.close()


def test_a_truncating_checkpoint_by_another_connection_is_appended_after(
    tmp_path: Path,
) -> None:
    # SQLite's own way of shortening the log: the records are in the file, and so is the
    # head this process wrote.
    chain = _no_view_chain(tmp_path, 3)
    conn = sqlite3.connect(tmp_path / "chain.sqlite3")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    assert os.path.getsize(tmp_path / "chain.sqlite3-wal") == 0
    assert chain.append(CANARY, receipt(n=3)).seq == 3
    _assert_whole(chain, tmp_path)


COUNT = "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT max(seq) FROM records').fetchone()[0])"  # noqa: E501


def test_a_writer_on_a_new_log_is_not_forked_by_a_process_holding_the_removed_one(
    tmp_path: Path,
) -> None:
    # After the log is removed, another process opens the file afresh (a new log) and
    # appends: the process still holding the removed log must not append its own seq 3.
    db = tmp_path / "chain.sqlite3"
    chain = _no_view_chain(tmp_path, 3)
    _checkpoint_and_remove(db, "-wal", "-shm")
    script = (
        "import sys\n"
        "from floorguard._chain.chain import AuditChain\n"
        "c = AuditChain(sys.argv[1], sys.argv[2])\n"
        "print(c.append('adapter.canary_receipt', {'kind': 'adapter.canary_receipt',"
        " 'schema_version': 1, 'ts': '2026-12-03T07:00:00Z'}).seq)\n"
    )
    other = subprocess.run([sys.executable, "-c", script, str(db), str(tmp_path / "chain.key")],
                           capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert other.returncode == 0 and other.stdout.strip() == "3", other.stderr
    with pytest.raises(ChainWriteError, match="removed or replaced"):
        chain.append(CANARY, receipt(n="a fork"))
    # (read from another process: this one's SQLite still maps the removed index)
    seen = subprocess.run([sys.executable, "-c", COUNT, str(db)], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert seen.stdout.strip() == "3", seen.stderr


def test_two_chain_objects_on_one_store_check_the_tree_each_extends_not_the_last_they_wrote(
    home: Path,
) -> None:
    # Each object keeps the root of the tree it last appended to; the other object's appends
    # (run ahead on the store they share) grow the tree meanwhile: the root an append checks
    # against the host's view must be the one of the tree it extends now.
    from floorguard._chain.chain_view import ChainViews
    from floorguard.chainstore.sqlite import SqliteStore

    store = SqliteStore(home / "chain.sqlite3")
    first, second = (
        AuditChain(store, home / "chain.key", views=ChainViews(home / "chain-view"))
        for _ in range(2)
    )
    seqs = []
    for n in range(5):
        seqs.append(first.append(CANARY, receipt(n=n)).seq)
        seqs.append(second.append(CANARY, receipt(n=n)).seq)
        seqs.append(second.append(CANARY, receipt(n=n)).seq)
    assert seqs == list(range(15))
    _assert_whole(first, home)
    # And a view naming another root for the tree the next append extends is still a fork.
    views = ChainViews(home / "chain-view")
    with views.locked():
        ((chain_id, seen),) = views.load().items()
        views.store({chain_id: type(seen)(seen.size, b"\x07" * 32, seen.location, seen.seen)})
    with pytest.raises(ChainRollbackError, match="fork"):
        first.append(CANARY, receipt(n="refused"))
    assert _count(home / "chain.sqlite3") == 15
