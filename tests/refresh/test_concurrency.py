"""Concurrent ``floorctl refresh --write`` on one module: no floor is ever lost.

The attack: two refreshes start from the same module. Without serialization both plan
against the same old map, both pass the downgrade check, and the last rename wins: the
first map vanishes (a floor dropped with no --allow-downgrade) and two different maps
carry the same map_version. Writers of a module now hold its lock from reading the old
block to the chain append, so the second builds on the first, or is refused as a
downgrade of the first's map.
"""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.cli import floorctl, isolated_env

from floorctl import refresh as refreshing
from floorctl.errors import ConcurrentUpdate
from floorctl.feeds import load_feed
from floorctl.splice import read_module_text
from floorguard._chain.receipts import receipt_id
from floorguard._maps.map_model import floor_map_hash, from_entries

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n\nTAIL = 1\n'
# Large enough that planning takes a noticeable time, so unserialized writers overlap.
ADAPTERS = 3000


def feed(round_no: int, names: range) -> dict[str, Any]:
    """Every floor of round ``round_no`` is above every floor of the rounds before it."""
    entry = {"min_safe_version": f"{round_no}.0.0", "advisory_id": "BSA-0001", "note": "Up."}
    return {"schema_version": 1, "adapters": {f"adapter-{n:05d}": entry for n in names}}


def start(project: Path, state: Path, feed_name: str, receipt: str) -> subprocess.Popen[str]:
    args = ["refresh", "--feed", feed_name, "--write", "--receipt-out", receipt, "--anchor"]
    return subprocess.Popen(
        [sys.executable, "-m", "floorctl", *args, "--json"],
        cwd=project,
        env=isolated_env(state),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def updates(project: Path, state: Path) -> list[dict[str, Any]]:
    done = floorctl("chain", "export", cwd=project, state=state)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return [r["receipt"] for r in records if r["event"] == "adapter.floor_update_receipt"]


def test_concurrent_refreshes_never_lose_a_floor(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    written: list[dict[str, Any]] = []
    for round_no in range(1, 4):
        # Three writers: a base feed, a superset of it, and another superset of it.
        # Whichever lands after a superset and carries less is a downgrade, so refused.
        feeds = {
            "base": feed(round_no, range(ADAPTERS)),
            "superset": feed(round_no, range(ADAPTERS + 50)),
            "other": feed(round_no, range(ADAPTERS + 100)),
        }
        for name, document in feeds.items():
            (project / f"{name}-{round_no}.json").write_text(json.dumps(document))
        procs = {
            name: start(project, state, f"{name}-{round_no}.json", f"{name}-{round_no}.dsse")
            for name in feeds
        }
        # communicate, not wait: a full pipe would block the child forever.
        outputs = {name: p.communicate(timeout=300) for name, p in procs.items()}
        results = {name: (procs[name].returncode, *outputs[name]) for name in procs}
        for name, (code, out, err) in results.items():
            assert "Traceback" not in err
            if code == 0:
                document = json.loads(out)
                if document["written"]:
                    written.append(document)
            else:
                assert code == 1, err
                assert "refusing a downgrade" in err, err
                assert not (project / f"{name}-{round_no}.dsse").exists()
        # Whatever the order, the largest feed of the round is in force at its end.
        in_force = read_module_text(project / MODULE)
        assert f'"adapter-{ADAPTERS + 99:05d}"' in in_force
        assert f'"{round_no}.0.0"' in in_force

    chain = updates(project, state)
    assert len(chain) == len(written) >= 3
    # Every successful writer's receipt (its envelope and --json) is the one anchored.
    assert sorted(d["receipt_id"] for d in written) == sorted(receipt_id(r) for r in chain)
    versions = [r["new_map_version"] for r in chain]
    assert versions == sorted(set(versions)), f"map versions repeat or go down: {versions}"
    empty = floor_map_hash(from_entries({}))
    previous_hash, previous_version = empty, 0
    for receipt in chain:
        # A chain of receipts: each builds on the map the one before it put in force.
        assert receipt["old_floor_map_hash"] == previous_hash
        assert receipt["old_map_version"] == previous_version
        assert receipt["new_map_version"] == previous_version + 1
        assert receipt["diff"]["removed"] == [] and receipt["downgrade"] is False
        previous_hash, previous_version = receipt["new_floor_map_hash"], receipt["new_map_version"]
    final = json.loads(
        floorctl("refresh", "--feed", "other-3.json", "--json", cwd=project, state=state).stdout
    )
    assert final["old_floor_map_hash"] == previous_hash


def test_a_refresh_waits_for_the_module_lock(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    (project / "feed.json").write_text(json.dumps(feed(1, range(3))))
    lock = project / MODULE.parent / f".{MODULE.name}.lock"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = start(project, state, "feed.json", "receipt.dsse")
        try:
            assert proc.stderr is not None
            selector = selectors.DefaultSelector()
            selector.register(proc.stderr, selectors.EVENT_READ)
            assert selector.select(timeout=60), "the refresh neither waited nor said so"
            assert "waiting for another refresh" in proc.stderr.readline()
            # While the lock is held, nothing is written.
            assert (project / MODULE).read_text() == EMPTY_MODULE
            assert not (project / "receipt.dsse").exists()
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
        code = proc.wait(timeout=120)
    assert code == 0, proc.communicate()[1]
    assert (project / MODULE).read_text() != EMPTY_MODULE


def test_refuses_a_link_at_the_lock_file(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    (project / "feed.json").write_text(json.dumps(feed(1, range(3))))
    victim = tmp_path / "victim"
    victim.write_bytes(b"victim")
    (project / MODULE.parent / f".{MODULE.name}.lock").symlink_to(victim)
    done = floorctl("refresh", "--feed", "feed.json", "--write", cwd=project, state=state)
    assert done.returncode == 1
    assert "cannot open the lock file" in done.stderr
    assert victim.read_bytes() == b"victim"
    assert (project / MODULE).read_text() == EMPTY_MODULE


def test_refuses_a_fifo_at_the_lock_file_without_hanging(tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    (project / "feed.json").write_text(json.dumps(feed(1, range(3))))
    os.mkfifo(project / MODULE.parent / f".{MODULE.name}.lock")
    # A generous bound for "does not hang": opening a FIFO for writing blocks forever.
    done = subprocess.run(
        [sys.executable, "-m", "floorctl", "refresh", "--feed", "feed.json", "--write"],
        cwd=project,
        env=isolated_env(state),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1
    assert "lock file is not a regular file" in done.stderr
    assert (project / MODULE).read_text() == EMPTY_MODULE


def test_refuses_to_replace_a_module_changed_since_it_was_planned(tmp_path: Path) -> None:
    """A writer that ignores the lock (an editor, an old floorctl) changed the module after
    the plan read it: the rename would silently drop that change, so nothing is written."""
    module = tmp_path / "floor_map.py"
    module.write_text(EMPTY_MODULE)
    feed_path = tmp_path / "feed.json"
    feed_path.write_text(json.dumps(feed(1, range(3))))
    receipt_out = tmp_path / "receipt.dsse"
    with refreshing.module_lock(module):
        planned = refreshing.plan(
            [load_feed(feed_path)], module, read_module_text(module), "floorguard"
        )
        edited = EMPTY_MODULE.replace("TAIL = 1", "TAIL = 2")
        module.write_text(edited)
        with pytest.raises(ConcurrentUpdate, match="changed while this refresh was running"):
            refreshing.apply(
                planned,
                receipt_out=receipt_out,
                signing_key=Ed25519PrivateKey.generate,
                chain=None,
            )
    assert module.read_text() == edited
    assert not receipt_out.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith((".tmp", ".undo"))) == []
    assert os.path.exists(refreshing.lock_path(module))
