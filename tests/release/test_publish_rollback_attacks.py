"""``floorctl publish`` refuses to roll a site back to an older map, whatever stands in the
newer one's place (a symlink, an expired or damaged map, a FIFO, a huge file) and when two
publishes race; real CLIs in subprocesses, state kept inside the test."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest
from helpers.cli import floorctl
from helpers.map_site import make_site, no_traceback

from floorguard._base._canonical import canonical_bytes

pytestmark = pytest.mark.attack


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return make_site(tmp_path)


def publish(
    root: Path, module: str, out: str, *extra: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return floorctl(
        "publish", "--out", out, "--module", module, "--signing-key", "keys/signing.key",
        *extra, cwd=root, state=root.parent / "s", timeout=timeout,
    )  # fmt: skip


def snapshot(directory: Path) -> dict[str, tuple[bool, bytes]]:
    return {p.name: (p.is_symlink(), p.read_bytes()) for p in directory.iterdir()}


def test_publish_refuses_an_older_map_over_a_symlink_to_a_newer_one(site: Path) -> None:
    assert publish(site, "newer.py", "elsewhere").returncode == 0
    out = site / "out"
    out.mkdir()
    (out / "floor-map.json").symlink_to(site / "elsewhere" / "floor-map.json")
    (out / "floor-map.json.dsse").symlink_to(site / "elsewhere" / "floor-map.json.dsse")
    before, target = snapshot(out), snapshot(site / "elsewhere")
    refused = publish(site, "older.py", "out")
    no_traceback(refused)
    assert refused.returncode == 1, refused.stderr
    assert snapshot(out) == before
    assert snapshot(site / "elsewhere") == target


def test_publish_refusal_with_json_prints_one_error_document(site: Path) -> None:
    assert publish(site, "newer.py", "out").returncode == 0
    before = snapshot(site / "out")
    refused = publish(site, "older.py", "out", "--json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["exit_status"] == 1
    assert snapshot(site / "out") == before


def test_publish_refuses_an_older_map_over_an_expired_newer_one(site: Path) -> None:
    assert publish(site, "newer.py", "out", "--expires-in", "1").returncode == 0
    path = site / "out" / "floor-map.json"
    # Hosts that took version 8 keep it as their highest, expired or not.
    document = json.loads(path.read_bytes())
    document["expires"] = "2000-01-01T00:00:00Z"
    path.write_bytes(canonical_bytes(document))
    refused = publish(site, "older.py", "out")
    no_traceback(refused)
    assert refused.returncode == 1, refused.stderr


def test_publish_over_a_fifo_does_not_hang(site: Path) -> None:
    out = site / "out"
    out.mkdir()
    os.mkfifo(out / "floor-map.json")
    done = publish(site, "older.py", "out", timeout=30)
    no_traceback(done)
    assert done.returncode in (0, 1)


def test_publish_over_a_huge_file(site: Path) -> None:
    out = site / "out"
    out.mkdir()
    with open(out / "floor-map.json", "wb") as handle:
        handle.truncate(200 * 1024 * 1024)
    done = publish(site, "older.py", "out", timeout=60)
    no_traceback(done)
    assert done.returncode in (0, 1)


def test_publish_over_a_damaged_newer_map(site: Path) -> None:
    assert publish(site, "newer.py", "out").returncode == 0
    path = site / "out" / "floor-map.json"
    for damaged in (
        {"map_version": "8"},
        {"map_version": 10**400},
        [],
        {"map_version": 9, "entries": "x"},
        {"map_version": True},
    ):
        text = (
            json.dumps(damaged)
            if damaged != {"map_version": 10**400}
            else '{"map_version": 1' + "0" * 5000 + "}"
        )
        path.write_text(text)
        done = publish(site, "older.py", "out")
        no_traceback(done)
        assert done.returncode in (0, 1)


def test_two_publishes_of_the_same_version_race(site: Path) -> None:
    # Two maps of version 8 published to one empty directory at once: without a lock both
    # passed the rollback check and the last rename won; one must be refused.
    for attempt in range(4):
        out = f"race{attempt}"
        results: dict[str, subprocess.CompletedProcess[str]] = {}

        def go(module: str, out: str = out, results: dict = results) -> None:
            results[module] = publish(site, module, out)

        threads = [threading.Thread(target=go, args=(m,)) for m in ("newer.py", "same.py")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(r.returncode for r in results.values())
        assert codes == [0, 1], [r.stderr for r in results.values()]
        [refused] = [r for r in results.values() if r.returncode == 1]
        assert "another map of the same version 8" in refused.stderr
