"""Benchmarks of the runtime's hot path (run with ``-m perf -s``).

- A preflight of a native program (asked its version at every preflight: a probe's answer
  is never reused) and its durable append, against one bare durable
  SQLite insert (``BEGIN IMMEDIATE; INSERT; COMMIT``) of a row of the same size with the
  same PRAGMAs (WAL, ``synchronous=FULL``): target under 1.5x.
- The same against a map of 50 advisories per adapter (three ranges and a listed version
  each), for a PyPI and an npm (SemVer) adapter whose version is outside every one of them,
  so that every range is compared: target under 1.5x.
- ``import floorguard`` against ``python -c pass``: target at most +15 ms.
(The cached detection against a real node ``--version`` is in test_bench_detect.py.)

The two are timed in turns, each first in every other round (what runs just after a
commit's fsync may wait for the disk longer); each prints the medians, the quartiles, the
ratio of the medians, and the ratio of the median CPU times (``time.thread_time``: the work
itself, without the waits for the disk, which a disk shared with other jobs stretches).
``FLOORGUARD_BENCH_DIR`` puts both databases in another folder (a tmpfs: the cost with
commits that cost no disk wait).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.bench import BareDurableTable
from helpers.grown_chain import grow_sqlite
from probes import aider_install
from probes.native import native_program

import floorguard
from floorguard._chain.chain import AuditChain
from floorguard._maps import active_map

pytestmark = pytest.mark.perf

ROUNDS = 600


def _folder(tmp_path: Path) -> Path:
    chosen = os.environ.get("FLOORGUARD_BENCH_DIR")
    if not chosen:
        return tmp_path
    import tempfile

    return Path(tempfile.mkdtemp(prefix="bench-preflight-", dir=chosen))


def _in_turns(
    ours: Callable[[], object], bare: Callable[[], object], rounds: int
) -> dict[str, list[tuple[float, float]]]:
    """(wall, cpu) seconds of each call, in turns, each first in every other round."""
    samples: dict[str, list[tuple[float, float]]] = {"ours": [], "bare": []}
    runs = {"ours": ours, "bare": bare}
    for n in range(rounds):
        for name in ("ours", "bare") if n % 2 == 0 else ("bare", "ours"):
            cpu, wall = time.thread_time(), time.perf_counter()
            runs[name]()
            samples[name].append((time.perf_counter() - wall, time.thread_time() - cpu))
    return samples


def _report(what: str, samples: dict[str, list[tuple[float, float]]]) -> None:
    def us(values: list[float]) -> str:
        q1, median, q3 = statistics.quantiles(values, n=4)
        return f"{median * 1e6:.0f} us ({q1 * 1e6:.0f}-{q3 * 1e6:.0f})"

    wall = {name: [w for w, _ in runs] for name, runs in samples.items()}
    cpu = {name: [c for _, c in runs] for name, runs in samples.items()}
    ratio = statistics.median(wall["ours"]) / statistics.median(wall["bare"])
    cpu_ratio = statistics.median(cpu["ours"]) / statistics.median(cpu["bare"])
    print(
        f"\n{what}: median {us(wall['ours'])}; bare durable insert {us(wall['bare'])}; "
        f"ratio {ratio:.2f}x (target < 1.5x); CPU {statistics.median(cpu['ours']) * 1e6:.0f} "
        f"us against {statistics.median(cpu['bare']) * 1e6:.0f} us, {cpu_ratio:.2f}x"
    )


def test_bench_preflight_against_a_bare_durable_insert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path)
    monkeypatch.setenv("FLOORGUARD_HOME", str(folder / "home"))
    monkeypatch.delenv("FLOORGUARD_ADAPTER_FLOOR_POLICY", raising=False)
    binary = native_program(tmp_path / "goose", stdout=b"goose 1.9.0\n")
    assert floorguard.preflight("goose", binary=str(binary)).verdict == "permit"  # warm
    line = next(AuditChain.from_env().export_lines())

    table = BareDurableTable(folder / "bare.sqlite3")
    samples = _in_turns(
        lambda: floorguard.preflight("goose", binary=str(binary)),
        lambda: table.timed_insert(line),
        ROUNDS,
    )
    table.close()
    _report("preflight of a native program (asked its version), durable append", samples)
    assert len(list(AuditChain.from_env().export_lines())) == ROUNDS + 1


def _many_advisories(ecosystem: str, pre: str) -> dict[str, object]:
    from helpers.advisory_maps import advisory, entry, span

    advisories = [
        advisory(
            f"GHSA-{n:04d}-0000-0000",
            span(f"{n}.0.0{pre}", fixed=f"{n}.1.0"),
            span(f"{n}.2.0", last_affected=f"{n}.2.9"),
            span(f"{n}.5.0", fixed=f"{n}.5.3"),
            versions=(f"{n}.7.1",),
            aliases=(f"CVE-2025-{n:04d}",),
        )
        for n in range(1, 51)
    ]
    return entry(ecosystem, *advisories)


# ecosystem: (adapter, its version, the pre-release that starts each first range): aider as
# pip installs it (its metadata read once), claude's native build (asked at every preflight).
CASES = {
    "PyPI": ("aider", "60.0.0", "a1"),
    "npm": ("claude", "60.0.0", "-alpha.1"),
}


@pytest.mark.parametrize("ecosystem", sorted(CASES))
def test_bench_preflight_with_50_advisories_per_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ecosystem: str
) -> None:
    adapter, version, pre = CASES[ecosystem]
    from helpers.advisory_maps import extended_module

    entries = {name: _many_advisories(ecosystem, pre) for name in ("aider", "claude", "gemini")}
    module = tmp_path / "floor_map.py"
    module.write_text(extended_module(entries), encoding="utf-8")
    # The map in force is read from this file (parsed, hash-checked) as from the package's.
    monkeypatch.setattr(active_map, "BUILTIN_MAP_FILE", module)
    folder = _folder(tmp_path)
    monkeypatch.setenv("FLOORGUARD_HOME", str(folder / "home"))
    monkeypatch.delenv("FLOORGUARD_ADAPTER_FLOOR_POLICY", raising=False)
    monkeypatch.delenv("FLOORGUARD_FLOOR_MAP", raising=False)
    if adapter == "aider":
        binary = aider_install(tmp_path / "venv", version)
    else:
        binary = native_program(tmp_path / adapter, stdout=f"{version} (Claude Code)\n".encode())
    first = floorguard.preflight(adapter, binary=str(binary))  # warm
    assert first.verdict == "permit", first.reason
    assert "outside the affected versions of 50 advisories" in first.reason
    row = next(AuditChain.from_env().export_lines())

    table = BareDurableTable(folder / "bare.sqlite3")
    samples = _in_turns(
        lambda: floorguard.preflight(adapter, binary=str(binary)),
        lambda: table.timed_insert(row),
        ROUNDS,
    )
    table.close()
    _report(f"preflight, 50 advisories x 3 ranges ({ecosystem})", samples)
    assert len(list(AuditChain.from_env().export_lines())) == ROUNDS + 1


def _run_ms(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return (time.perf_counter() - started) * 1000


def test_bench_import_cost() -> None:
    for _ in range(3):  # warm the page cache
        _run_ms("import floorguard")
    bare_runs, imported_runs = [], []
    for _ in range(40):  # interleaved, so both see the same machine load
        bare_runs.append(_run_ms("pass"))
        imported_runs.append(_run_ms("import floorguard"))
    bare, imported = statistics.median(bare_runs), statistics.median(imported_runs)
    print(
        f"\npython -c pass: {bare:.1f} ms; import floorguard: {imported:.1f} ms; "
        f"cost +{imported - bare:.1f} ms (target <= +15 ms)"
    )
    heavy = subprocess.run(
        [sys.executable, "-c", "import sys, floorguard; print(sorted(m for m in "
         "('jsonschema','jinja2','httpx','click','floorctl','cryptography','sqlite3','rfc8785')"
         " if m in sys.modules))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert heavy == "[]"


def _chain_of(home: Path, count: int) -> None:
    """A chain of ``count`` records in ``home``: one appended, the rest written straight into
    the database as the chain would write them (linked, with their MACs and tree nodes)."""
    chain = AuditChain(home / "chain.sqlite3", home / "chain.key")
    chain.append(
        "adapter.canary_receipt",
        {"kind": "adapter.canary_receipt", "schema_version": 1, "ts": "2026-01-01T00:00:00Z"},
    )
    grow_sqlite(chain, count - 1)


@pytest.mark.parametrize("size", [1_000, 100_000, 1_000_000])
def test_bench_preflight_by_the_size_of_the_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    # How the preflight's cost grows with the chain: an append reads the head and (run
    # ahead) nothing else, or (the ordinary way) the tree's right edge, one node per bit of
    # the size; every B-tree lookup and insert is O(log n).
    folder = _folder(tmp_path)
    home = folder / "home"
    home.mkdir()
    monkeypatch.setenv("FLOORGUARD_HOME", str(home))
    monkeypatch.delenv("FLOORGUARD_ADAPTER_FLOOR_POLICY", raising=False)
    _chain_of(home, size)
    binary = native_program(tmp_path / "goose", stdout=b"goose 1.9.0\n")
    assert floorguard.preflight("goose", binary=str(binary)).seq == size  # warm
    line = AuditChain.from_env().head()
    assert line is not None
    table = BareDurableTable(folder / "bare.sqlite3")
    samples = _in_turns(
        lambda: floorguard.preflight("goose", binary=str(binary)),
        lambda: table.timed_insert(line.to_json_line()),
        ROUNDS // 2,
    )
    table.close()
    _report(f"preflight onto a chain of {size:,} records", samples)
