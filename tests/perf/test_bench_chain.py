"""Benchmarks of the audit chain (run with ``-m perf``; excluded from the default run).

- A durable append against one bare durable SQLite insert of the same size with the same
  PRAGMAs (WAL, synchronous=FULL, BEGIN IMMEDIATE): target at most 2x.
- Verifying a 200,000-record slice against the bare floor of reading its lines, one
  ``json.loads`` and one ``hmac.digest`` per line: target at most 2.5x.

The ratios are printed (``-s`` shows them); the assertions allow for noisy shared machines
and catch only regressions well past the targets.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
from helpers.bench import BareDurableTable, interleaved_medians, read_parse_and_mac
from helpers.slice_writer import write_slice

from floorguard._chain.chain import AuditChain
from floorguard._proofs.slice_verify import verify_path

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

    def ours() -> None:
        report = verify_path(slice_file, key=key)
        assert report.intact and report.records == count

    medians = interleaved_medians(
        {"floor": lambda: read_parse_and_mac(slice_file, key), "ours": ours}
    )
    floor_s, ours_s = medians["floor"], medians["ours"]
    ratio = ours_s / floor_s
    print(
        f"\nverify {count} records: {ours_s:.2f} s ({ours_s / count * 1e6:.1f} us/record), "
        f"bare floor {floor_s:.2f} s, ratio {ratio:.2f}x (target <= 2.5x)"
    )
    assert ratio < 4
