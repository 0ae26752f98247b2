"""Benchmarks of the audit chain (run with ``-m perf``; excluded from the default run).

- A durable append against one bare durable SQLite insert of the same size with the same
  PRAGMAs (WAL, synchronous=FULL, BEGIN IMMEDIATE): target at most 2x.
- Verifying a 200,000-record slice against the bare floor of reading its lines, one
  ``json.loads`` and one ``hmac.digest`` per line: target under 2x. Fresh processes take
  turns; with ``FLOORGUARD_BENCH_BEFORE=<git revision>`` that revision's verifier takes
  turns with this tree's, each against the floor in its own process (before and after).
- Its peak memory at 20,000, 60,000 and 200,000 records: flat (it streams).

The ratios are printed (``-s`` shows them); the assertions allow for noisy shared machines
and catch only regressions well past the targets.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
from helpers.bench import BareDurableTable
from helpers.bench_verify import before_tree, compare, peak_kib
from helpers.slice_writer import write_slice

from floorguard._chain.chain import AuditChain

pytestmark = pytest.mark.perf

SPAWN = "adapter.spawn_preflight_receipt"


def _receipt(n: int) -> dict[str, object]:
    return {
        "kind": SPAWN,
        "schema_version": 1,
        "ts": "2026-11-30T03:05:18.123456Z",
        "adapter": "aider",
        "binary": "/usr/local/bin/aider",
        "version": f"0.59.{n % 100}",
        "detected_by": "--version",
        "floor": "0.60.0",
        "advisory_id": "BSA-0001",
        "verdict": "refuse",
        "reason": "aider is below its floor 0.60.0 (BSA-0001)",
        "policy": "block",
        "floor_map_hash": "sha256:" + "ab" * 32,
        "n": n,
    }


def test_bench_durable_append_against_a_bare_insert(tmp_path: Path) -> None:
    rounds = 500
    chain = AuditChain(tmp_path / "chain" / "chain.sqlite3", tmp_path / "chain" / "chain.key")
    chain.append(SPAWN, _receipt(0))  # the first append creates the database and the key
    row = next(chain.export_lines())
    table = BareDurableTable(tmp_path / "bare.sqlite3")

    ours, bare = [], []
    # Interleaved, so that both see the same disk and the same neighbours.
    for n in range(rounds):
        started = time.perf_counter()
        chain.append(SPAWN, _receipt(n))
        ours.append(time.perf_counter() - started)
        bare.append(table.timed_insert(row))
    table.close()

    ratio = statistics.median(ours) / statistics.median(bare)
    print(
        f"\ndurable append: median {statistics.median(ours) * 1e6:.0f} us, bare insert "
        f"{statistics.median(bare) * 1e6:.0f} us, ratio {ratio:.2f}x (target <= 2x)"
    )
    assert ratio < 4


def test_bench_verify_200k_records_against_the_bare_floor(tmp_path: Path) -> None:
    count = 200_000
    key = bytes(range(32))
    slice_file = tmp_path / "slice.jsonl"
    write_slice(slice_file, count, key, _receipt)
    measured = compare(slice_file, "verify", before_tree(tmp_path))
    print(f"\nverify {count} records against read + json.loads + hmac (target < 2x):")
    for tree in sorted(measured.by_tree):
        print("  " + measured.line(tree))
    assert statistics.median(measured.by_tree["after"]) < 4


def test_bench_verify_memory_is_flat_at_three_sizes(tmp_path: Path) -> None:
    key = bytes(range(32))
    peaks = {}
    for count in (20_000, 60_000, 200_000):
        slice_file = tmp_path / f"slice-{count}.jsonl"
        write_slice(slice_file, count, key, _receipt)
        peaks[count] = (peak_kib(slice_file, "peak-verify"), peak_kib(slice_file, "peak-floor"))
        slice_file.unlink()
    print("\nverify, peak RSS (VmHWM) of a fresh process: " + ", ".join(
        f"{count:,} records {ours / 1024:.1f} MiB (floor {floor / 1024:.1f} MiB)"
        for count, (ours, floor) in peaks.items()
    ))  # fmt: skip
    assert peaks[200_000][0] - peaks[20_000][0] < 16 * 1024
