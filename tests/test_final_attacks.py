"""Outside attacks on publish's rollback refusal, verify receipt --floor-map modules, and
--json failure documents (real CLIs in subprocesses, state kept inside the test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from unittest.mock import ANY as mock_any

import pytest
from helpers.cli import floorctl, isolated_env
from hosts import floor, map_module

from floorguard._canonical import canonical_bytes

pytestmark = pytest.mark.slow  # (run by .ci/run, not by the README's test command)

FEED = {
    "schema_version": 1,
    "adapters": {
        "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "Upgrade."}
    },
}


def run(
    *args: str | Path, cwd: Path, state: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorctl", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=isolated_env(state),
        timeout=timeout,
        check=False,
    )


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    assert "Traceback" not in done.stdout, done.stdout


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    assert floorctl("keygen", "--out", "keys", cwd=root, state=tmp_path / "s").returncode == 0
    (root / "newer.py").write_text(map_module({"aider": floor("0.70.0")}, version=8))
    (root / "older.py").write_text(map_module({"aider": floor("0.60.0")}, version=7))
    (root / "same.py").write_text(map_module({"aider": floor("0.71.0")}, version=8))
    return root


def publish(
    root: Path, module: str, out: str, *extra: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return run(
        "publish", "--out", out, "--module", module, "--signing-key", "keys/signing.key",
        *extra, cwd=root, state=root.parent / "s", timeout=timeout,
    )  # fmt: skip


def snapshot(directory: Path) -> dict[str, tuple[bool, bytes]]:
    return {p.name: (p.is_symlink(), p.read_bytes()) for p in directory.iterdir()}


# --- publish ---------------------------------------------------------------------------


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


# --- verify receipt --floor-map MODULE --------------------------------------------------


@pytest.fixture(scope="module")
def receipted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("final") / "p"
    root.mkdir()
    state = root.parent / "s"
    assert floorctl("keygen", "--out", "keys", cwd=root, state=state).returncode == 0
    (root / "floor_map.py").write_text("# floor-map:begin\n# floor-map:end\n")
    (root / "feed.json").write_text(json.dumps(FEED))
    done = floorctl(
        "refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write",
        "--receipt-out", "receipt.json", "--signing-key", "keys/signing.key", cwd=root, state=state,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root


def verify_both(
    root: Path, module: str, timeout: float = 30
) -> list[subprocess.CompletedProcess[str]]:
    out = []
    for program in ("floorctl", "floorguard"):
        out.append(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    program,
                    "verify",
                    "receipt",
                    "receipt.json",
                    "--pubkey",
                    "keys/signing.pub",
                    "--floor-map",
                    module,
                ],
                capture_output=True,
                text=True,
                cwd=root,
                env=isolated_env(root.parent / "s"),
                timeout=timeout,
                check=False,
            )
        )
    return out


def tricky_modules(original: str) -> dict[str, str | bytes]:
    lower = original.replace('"0.60.0"', '"0.10.0"')
    head, rest = original.split("FLOOR_MAP_ENTRIES = ", 1)
    lower_rest = lower.split("FLOOR_MAP_ENTRIES = ", 1)[1]
    return {
        "twice-original-first": original.replace("# floor-map:end\n", "")
        + "FLOOR_MAP_ENTRIES = "
        + lower_rest,
        "twice-changed-first": lower + "\nFLOOR_MAP_ENTRIES = " + rest.split("# floor-map:end")[0],
        "annotated": head + "FLOOR_MAP_ENTRIES: dict = " + lower_rest,
        "annotated-after": original
        + "\nFLOOR_MAP_ENTRIES: dict = "
        + lower_rest.split("# floor-map:end")[0],
        "augmented": original + '\nFLOOR_MAP_ENTRIES |= {"aider": {}}\n',
        "non-literal": head
        + "FLOOR_MAP_ENTRIES = dict("
        + lower_rest.split("# floor-map:end")[0]
        + ")\n# floor-map:end\n",
        "after-end": original + "FLOOR_MAP_ENTRIES = " + lower_rest.split("# floor-map:end")[0],
        "tuple-target": original
        + "\nFLOOR_MAP_ENTRIES, X = "
        + lower_rest.split("# floor-map:end")[0].strip()
        + ", 1\n",
        "for-target": original + "for FLOOR_MAP_ENTRIES in [{}]:\n    pass\n",
        "import-as": original + "import json as FLOOR_MAP_ENTRIES\n",
        "star-import": original + "from os.path import *\n",
        "def": original + "def FLOOR_MAP_ENTRIES():\n    pass\n",
        "item-assigned": original + 'FLOOR_MAP_ENTRIES["aider"]["min_safe_version"] = "0.1"\n',
        "item-deleted": original + 'del FLOOR_MAP_ENTRIES["aider"]\n',
        "updated": original + "FLOOR_MAP_ENTRIES.update(aider={})\n",
        "nested-update": original + 'FLOOR_MAP_ENTRIES["aider"].update(note="x")\n',
        "walrus": original
        + "\n(FLOOR_MAP_ENTRIES := "
        + lower_rest.split("# floor-map:end")[0]
        + ")\n",
        "null-bytes": original.encode() + b"\x00\n",
        "not-utf8": original.encode() + b"# \xff\n",
    }


def test_verify_receipt_refuses_tricky_modules_in_both_clis(receipted: Path) -> None:
    original = (receipted / "floor_map.py").read_text()
    assert [d.returncode for d in verify_both(receipted, "floor_map.py")] == [0, 0]
    for name, text in tricky_modules(original).items():
        path = receipted / f"{name.replace('-', '_')}.py"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        for done in verify_both(receipted, path.name):
            no_traceback(done)
            assert done.returncode == 1, (name, done.args[2], done.stdout, done.stderr)


def test_verify_receipt_with_a_fifo_or_huge_module(receipted: Path) -> None:
    os.mkfifo(receipted / "fifo_map.py")
    with open(receipted / "huge_map.py", "wb") as handle:
        handle.truncate(300 * 1024 * 1024)
    for name in ("fifo_map.py", "huge_map.py"):
        for done in verify_both(receipted, name):
            no_traceback(done)
            assert done.returncode == 1, (name, done.stderr)


# --- Quick start and --json failures ------------------------------------------------------


def test_json_failure_documents(site: Path, tmp_path: Path) -> None:
    state = tmp_path / "s"

    def one_error(done: subprocess.CompletedProcess[str], status: int) -> None:
        no_traceback(done)
        assert done.returncode == status, done.stderr
        assert json.loads(done.stdout) == {"error": {"message": mock_any, "exit_status": status}}

    one_error(
        run("publish", "--out", "o", "--module", "nowhere.py", "--json", cwd=site, state=state), 1
    )
    one_error(
        run("refresh", "--feed", "x.json", "--format", "yaml", "--json", cwd=site, state=state), 2
    )
    one_error(run("publish", "--out", "o", "--format", "sarif", "--json", cwd=site, state=state), 2)
    # An unreadable configuration (as root, permissions do not stop a read: a folder, a FIFO).
    (site / "pyproject.toml").mkdir()
    one_error(run("refresh", "--check", "--json", cwd=site, state=state, timeout=30), 2)
    (site / "pyproject.toml").rmdir()
    os.mkfifo(site / "pyproject.toml")
    one_error(run("refresh", "--check", "--json", cwd=site, state=state, timeout=30), 2)
    (site / "broken.toml").write_text("[tool.floorctl\n")
    one_error(
        run("--config", "broken.toml", "refresh", "--check", "--json", cwd=site, state=state), 2
    )
