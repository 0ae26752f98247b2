"""Benchmarks of the PostgreSQL chain (run with ``-m perf``; excluded from the default run).

- A durable append (advisory lock, head read and MAC check, record and tree rows, commit)
  against one bare psycopg INSERT of the same row with its COMMIT on the same server and
  the same kind of connection: target at most 2x.
- Throughput (records per second) with 1, 4 and 8 concurrent appending processes, side by
  side with the SQLite chain on this machine.

The figures are printed (``-s`` shows them); the assertion allows for noisy shared machines.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pgserver
import pytest
from helpers.bench_chain import SPAWN, _database, _receipt
from helpers.cli import isolated_env

from floorguard._chain.chain import AuditChain

pytestmark = pytest.mark.perf

server = pytest.fixture(scope="module")(pgserver.provide)


def test_bench_postgres_append_against_a_bare_insert_and_commit(
    server: pgserver.PgServer, tmp_path: Path
) -> None:
    import psycopg

    env = _database(server, tmp_path)
    chain = AuditChain.from_env(env)
    chain.append(SPAWN, _receipt(0))
    head = chain.head()
    assert head is not None
    bare = psycopg.connect(env["FLOORGUARD_CHAIN_URL"])  # a transaction per INSERT
    row = (head.ts, head.chain_id, head.event, head.receipt_id, next(chain.export_lines()),
           head.prev, head.mac)  # fmt: skip
    ours, floor = [], []
    for n in range(1, 400):  # interleaved: both see the same server and the same load
        started = time.perf_counter()
        chain.append(SPAWN, _receipt(n))
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        bare.execute("INSERT INTO bare VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", (n, *row))
        bare.commit()
        floor.append(time.perf_counter() - started)
    bare.close()
    ratio = statistics.median(ours) / statistics.median(floor)
    print(
        f"\npostgres append: median {statistics.median(ours) * 1e6:.0f} us, bare INSERT+COMMIT "
        f"{statistics.median(floor) * 1e6:.0f} us, ratio {ratio:.2f}x (target <= 2x)"
    )
    assert ratio < 4


APPENDER = textwrap.dedent(
    """
    import sys
    from floorguard._chain.chain import AuditChain
    count = int(sys.argv[1])
    chain = AuditChain.shared()
    chain.append("adapter.canary_receipt", {"kind": "adapter.canary_receipt",
                 "schema_version": 1, "ts": "2026-11-30T03:05:18Z", "warm": True})
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()
    for n in range(count):
        chain.append("adapter.canary_receipt", {"kind": "adapter.canary_receipt",
                     "schema_version": 1, "ts": "2026-11-30T03:05:18Z", "n": n})
    """
)


def _throughput(env: dict[str, str], workers: int, total: int) -> float:
    """Records per second of ``workers`` processes appending ``total`` records together."""
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(total // workers)], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(workers)
    ]  # fmt: skip
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    started = time.perf_counter()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        proc.stdin.close()
    for proc in procs:
        assert proc.wait(timeout=600) == 0
    return (total // workers) * workers / (time.perf_counter() - started)


def test_bench_throughput_of_1_4_8_appenders_postgres_and_sqlite(
    server: pgserver.PgServer, tmp_path: Path
) -> None:
    total = int(os.environ.get("FLOORGUARD_BENCH_APPENDS", "800"))
    pg_env = _database(server, tmp_path)
    lines = [f"\n{total} appends  {'workers':>7}  {'postgres rec/s':>14}  {'sqlite rec/s':>12}"]
    for workers in (1, 4, 8):
        sqlite_env = isolated_env(tmp_path / f"sqlite-{workers}")
        pg_rate = _throughput(pg_env, workers, total)
        sqlite_rate = _throughput(sqlite_env, workers, total)
        lines.append(f"{'':12}  {workers:>7}  {pg_rate:>14.0f}  {sqlite_rate:>12.0f}")
        assert pg_rate > 0 and sqlite_rate > 0
    print("\n".join(lines))
