"""A spawn judged while a refresh lands: the race forced with flag files, never timed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hosts import HOST, Host
from probes.native import native_program


def preflight_across(
    host: Host,
    tmp_path: Path,
    adapter: str,
    version_line: str,
    meanwhile: Callable[[], subprocess.CompletedProcess[str]],
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Run the host's preflight of ``adapter`` on a binary whose ``--version`` probe says it
    started and then waits; run ``meanwhile`` (a refresh) while it waits, then let it print
    ``version_line``. Returns the decision and what ``meanwhile`` returned."""
    started, released = tmp_path / "probe-started", tmp_path / "probe-released"
    binary = native_program(
        tmp_path / adapter,
        stdout=version_line.encode() + b"\n",
        marker=started,
        wait_for=released,
    )
    request = json.dumps({"adapter": adapter, "binary": str(binary), "version": None})
    spawn = subprocess.Popen(
        [sys.executable, "-c", HOST, request],
        env=host.env(FLOORGUARD_PROBE_TIMEOUT="120"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(2400):  # the host has read its map and is probing the binary
            if started.exists() or spawn.poll() is not None:
                break
            time.sleep(0.05)
        assert started.exists(), "the probe never started"
        done = meanwhile()
    finally:
        released.touch()
    out, err = spawn.communicate(timeout=120)
    assert spawn.returncode == 0, err
    decision: dict[str, Any] = json.loads(out)
    return decision, done


def spawn_after_update(host: Host) -> tuple[int, int]:
    """The seq of the last floor update and of the (only) spawn record in the host's chain."""
    events = [(r["seq"], r["event"]) for r in host.chain_records()]
    update = max(seq for seq, event in events if event == "adapter.floor_update_receipt")
    (spawned,) = [seq for seq, event in events if event == "adapter.spawn_preflight_receipt"]
    return update, spawned
