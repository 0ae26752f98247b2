"""Many processes append at once, and some die mid-append: still one verifiable chain."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from helpers.tree_support import assert_tree_matches_records

from floorguard._chain.chain import AuditChain
from floorguard._proofs.slice_verify import verify_slice

APPENDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from floorguard._base._time import now_ts
    from floorguard._chain.chain import AuditChain

    folder, worker, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    chain = AuditChain(folder / "chain.sqlite3", folder / "chain.key")
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    sys.stdin.readline()  # start together
    n = 0
    while count < 0 or n < count:
        record = chain.append(
            "adapter.canary_receipt",
            {"kind": "adapter.canary_receipt", "schema_version": 1, "ts": now_ts(),
             "worker": worker, "n": n},
        )
        # Acknowledged only once append has returned, i.e. once the record is durable.
        sys.stdout.write(f"{record.seq} {record.receipt_id}\\n")
        sys.stdout.flush()
        n += 1
    """
)


def _start(folder: Path, workers: int, count: int) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(folder), str(worker), str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for worker in range(workers)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


def _key(folder: Path) -> bytes:
    return bytes.fromhex((folder / "chain.key").read_text().strip())


def test_concurrent_appenders_build_one_linear_chain(tmp_path: Path) -> None:
    # From an empty folder: creating the database and the key races too.
    procs = _start(tmp_path, workers=8, count=300)
    acknowledged: list[str] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        acknowledged += out.splitlines()
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    lines = [line + "\n" for line in chain.export_lines()]
    report = verify_slice(lines, key=_key(tmp_path))
    assert report.intact, report.integrity_errors[:5]
    assert (report.records, report.first_seq, report.last_seq) == (2400, 0, 2399)
    seqs = sorted(int(line.split()[0]) for line in acknowledged)
    assert seqs == list(range(2400))  # each seq handed out once: no fork, no duplicate
    stored = {record.receipt_id for record in chain.records()}
    assert {line.split()[1] for line in acknowledged} == stored
    # The Merkle tree was kept in the same transactions: one leaf per record, in order.
    assert assert_tree_matches_records(chain) == 2400


def test_killed_appenders_leave_a_verifiable_chain_with_every_acknowledged_record(
    tmp_path: Path,
) -> None:
    rng = random.Random(20261130)
    acknowledged: set[str] = set()
    for _round in range(3):
        procs = _start(tmp_path, workers=4, count=-1)
        for proc in procs:
            time.sleep(rng.uniform(0.05, 0.4))
            os.kill(proc.pid, signal.SIGKILL)
        for proc in procs:
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == -signal.SIGKILL
            # Each acknowledgement is one write() of under PIPE_BUF bytes, so whole or absent.
            acknowledged |= {line.split()[1] for line in out.splitlines()}
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    lines = [line + "\n" for line in chain.export_lines()]
    report = verify_slice(lines, key=_key(tmp_path))
    assert report.intact, report.integrity_errors[:5]
    stored = {record.receipt_id for record in chain.records()}
    assert acknowledged and acknowledged <= stored
    assert_tree_matches_records(chain)
    # The chain is still writable after the crashes.
    chain.append(
        "adapter.canary_receipt",
        {"kind": "adapter.canary_receipt", "schema_version": 1, "ts": "2026-01-01T00:00:00Z"},
    )
    assert_tree_matches_records(chain)
