"""Progress on long work, on a terminal only: the real CLI with stderr a pseudo-terminal
shows progress lines just above each threshold; with stderr a pipe it shows none."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from feedserver import FeedServer
from helpers.cli import floorctl
from helpers.proof_support import MAP_V1, update_receipt
from helpers.slice_writer import write_slice
from helpers.terminal import floorctl_on_terminal

from floorguard._maps.map_model import entries_hash

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n'
KEY = bytes(range(32))


def feed_of(count: int) -> bytes:
    entry = {"min_safe_version": "1.0.0", "advisory_id": "BSA-0001", "note": "Upgrade."}
    adapters = {f"adapter-{n:06d}": entry for n in range(count)}
    return json.dumps({"schema_version": 1, "adapters": adapters}).encode()


def progress_lines(stderr: str, what: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"floorctl: {what}: ")]


# --- refresh: 10,000 adapters and up ------------------------------------------------------------


def refresh_project(root: Path, adapters: int) -> Path:
    root.mkdir()
    (root / "floor_map.py").write_text(EMPTY_MODULE)
    (root / "feed.json").write_bytes(feed_of(adapters))
    return root


REFRESH = ("refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write")


def test_refresh_of_10_001_adapters_shows_its_stages_on_a_terminal(tmp_path: Path) -> None:
    project = refresh_project(tmp_path / "p", 10_001)
    run = floorctl_on_terminal(
        *REFRESH, "--receipt-out", "r.json", cwd=project, state=tmp_path / "s"
    )
    assert run.returncode == 0, run.stderr
    stages = progress_lines(run.stderr, "refresh")
    assert any("rendering 10,001 adapters" in line for line in stages), run.stderr
    assert any("sealing the update receipt" in line for line in stages), run.stderr
    assert any("writing floor_map.py" in line for line in stages), run.stderr


def test_refresh_shows_no_progress_when_stderr_is_piped(tmp_path: Path) -> None:
    project = refresh_project(tmp_path / "p", 10_001)
    done = floorctl(*REFRESH, cwd=project, state=tmp_path / "s")
    assert done.returncode == 0, done.stderr
    assert progress_lines(done.stderr, "refresh") == []


def test_refresh_below_10_000_adapters_shows_no_progress_on_a_terminal(tmp_path: Path) -> None:
    project = refresh_project(tmp_path / "p", 9_999)
    run = floorctl_on_terminal(*REFRESH, cwd=project, state=tmp_path / "s")
    assert run.returncode == 0, run.stderr
    assert progress_lines(run.stderr, "refresh") == []


# --- verify chain: 50,000 records and up --------------------------------------------------------


@pytest.fixture(scope="module")
def long_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("slice")
    map_hash = entries_hash(MAP_V1)

    def receipt(n: int) -> dict[str, Any]:
        if n == 0:
            return update_receipt(MAP_V1)
        return {
            "kind": "adapter.spawn_preflight_receipt",
            "schema_version": 1,
            "ts": "2026-11-30T00:00:00Z",
            "adapter": "aider",
            "binary": "/usr/local/bin/aider",
            "version": "0.59.0",
            "detected_by": "--version",
            "floor": "0.60.0",
            "advisory_id": "BSA-0001",
            "verdict": "refuse",
            "reason": "aider is below its floor",
            "policy": "block",
            "floor_map_hash": map_hash,
        }

    write_slice(folder / "slice.jsonl", 50_001, KEY, receipt)
    (folder / "chain.key").write_text(KEY.hex())
    (folder / "chain.key").chmod(0o600)
    return folder


VERIFY = ("verify", "chain", "slice.jsonl", "--key-file", "chain.key")


def test_verify_chain_of_50_001_records_counts_them_on_a_terminal(
    long_slice: Path, tmp_path: Path
) -> None:
    run = floorctl_on_terminal(*VERIFY, cwd=long_slice, state=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("PROVEN")
    assert progress_lines(run.stderr, "verify chain") == [
        "floorctl: verify chain: 50,000 records checked"
    ]


def test_verify_chain_shows_no_progress_when_stderr_is_piped(
    long_slice: Path, tmp_path: Path
) -> None:
    done = floorctl(*VERIFY, cwd=long_slice, state=tmp_path)
    assert done.returncode == 0, done.stderr
    assert progress_lines(done.stderr, "verify chain") == []


# --- import osv: every 10,000 records -----------------------------------------------------------


def osv_records(path: Path, count: int) -> Path:
    affected = [
        {
            "package": {"ecosystem": "npm", "name": "left-pad"},
            "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "1.0.0"}]}],
        }
    ]
    records = [
        {
            "schema_version": "1.6.0",
            "id": f"GHSA-{n:04d}-aaaa-bbbb",
            "modified": "2024-01-01T00:00:00Z",
            "affected": affected,
        }
        for n in range(count)
    ]
    path.write_text(json.dumps(records))
    return path


def test_import_osv_of_10_001_records_counts_them_on_a_terminal(tmp_path: Path) -> None:
    osv_records(tmp_path / "records.json", 10_001)
    run = floorctl_on_terminal(
        "import", "osv", "records.json", "--out", "feed.json", cwd=tmp_path, state=tmp_path
    )
    assert run.returncode == 0, run.stderr
    # Counted as records are read (a record file is read at once: 10,001 in one step).
    (line,) = progress_lines(run.stderr, "import osv")
    assert re.fullmatch(r"floorctl: import osv: 10,00[01] records read", line), line


def test_import_osv_shows_no_progress_when_stderr_is_piped(tmp_path: Path) -> None:
    osv_records(tmp_path / "records.json", 10_001)
    done = floorctl(
        "import", "osv", "records.json", "--out", "feed.json", cwd=tmp_path, state=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert progress_lines(done.stderr, "import osv") == []


# --- fetch: bodies of 1 MiB and up --------------------------------------------------------------


@pytest.fixture
def big_feed_url() -> Iterator[str]:
    server = FeedServer()
    body = feed_of(12_000)
    assert len(body) > 1024 * 1024
    server.serve("/feed.json", body)
    yield server.url("/feed.json")
    server.close()


def test_fetch_of_a_body_over_1_mib_counts_its_bytes_on_a_terminal(
    big_feed_url: str, tmp_path: Path
) -> None:
    run = floorctl_on_terminal(
        "fetch", big_feed_url, "--out", "feed.json", cwd=tmp_path, state=tmp_path
    )
    assert run.returncode == 0, run.stderr
    assert "floorctl: downloading " in run.stderr and " bytes" in run.stderr


def test_fetch_shows_no_progress_when_stderr_is_piped(big_feed_url: str, tmp_path: Path) -> None:
    done = floorctl("fetch", big_feed_url, "--out", "feed.json", cwd=tmp_path, state=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "downloading" not in done.stderr
