"""Benchmarks of identification (run with ``-m perf -s``): what a decision costs when the
code to judge is large, and when the adapter is a real-sized pip install.

- ``python -c`` with 5,000 import statements against an aider-chat RECORD of 2,500 lines:
  one decision, end to end in a host process (target: well under a second; an early
  version re-read RECORD per import statement and took 30 s).
- A warm preflight of a pip console script (identified by its imports, version from the
  distribution the import resolves to) against one bare durable insert.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
from helpers.bench import BareDurableTable
from hosts import Host, floor
from probes import pip_install, site_packages

pytestmark = pytest.mark.perf


def big_aider(tmp_path: Path) -> Path:
    script = pip_install(
        tmp_path / "venv", dist="aider-chat", module="aider", version="0.70.0",
        marker=tmp_path / "ran",
    )  # fmt: skip
    [record] = site_packages(tmp_path / "venv").glob("aider_chat-*.dist-info/RECORD")
    docs = "".join(f"aider/website/docs/p{i:05d}.md,sha256={'A' * 43},1234\n" for i in range(2500))
    record.write_text(record.read_text() + docs)
    return script


def test_bench_a_decision_on_large_code(tmp_path: Path) -> None:
    big_aider(tmp_path)
    host = Host(tmp_path / "host", {"aider": floor("0.60.0")})
    code = "import os\n" * 5000 + "print('ok')"
    python = tmp_path / "venv" / "bin" / "python"
    started = time.monotonic()
    [result] = host.spawn(adapter="python", binary=str(python), argv=["-c", code])
    elapsed = time.monotonic() - started
    print(f"\none decision on 5,000 imports with a 2,500-line RECORD: {elapsed:.2f} s")
    assert result["started"], result


def test_bench_warm_preflight_of_a_console_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import floorguard
    from floorguard._chain.chain import AuditChain

    script = big_aider(tmp_path)
    monkeypatch.setenv("FLOORGUARD_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FLOORGUARD_ADAPTER_FLOOR_POLICY", raising=False)
    # The package's own map has aider's floor at or below 0.70.0.
    assert floorguard.preflight("aider", binary=str(script)).verdict == "permit"
    line = next(AuditChain.from_env().export_lines())
    table = BareDurableTable(tmp_path / "bare.sqlite3")
    ours, bare = [], []
    for _ in range(200):
        started = time.perf_counter()
        floorguard.preflight("aider", binary=str(script))
        ours.append(time.perf_counter() - started)
        bare.append(table.timed_insert(line))
    table.close()
    ratio = statistics.median(ours) / statistics.median(bare)
    print(
        f"\nwarm preflight of a pip console script: median {statistics.median(ours) * 1e6:.0f} us;"
        f" bare durable insert {statistics.median(bare) * 1e6:.0f} us; ratio {ratio:.2f}x"
    )
