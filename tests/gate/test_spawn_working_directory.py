"""spawn starts the child in the folder it judged, whatever the host does meanwhile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from probes.native import Run, native_agent

import floorguard
from floorguard._gate import launcher


def test_without_cwd_the_child_starts_in_the_hosts_folder_as_it_was_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without cwd the child runs in the host's working directory, which another thread of
    # the host may change between the check and the exec: the folder judged (where a
    # version manager's shim read the version it answered for) is the one the child gets.
    judged, elsewhere = tmp_path / "judged", tmp_path / "elsewhere"
    judged.mkdir()
    elsewhere.mkdir()
    ran_in = tmp_path / "ran_in"
    codex = native_agent(
        tmp_path / "codex", version=b"codex-cli 0.50.0\n", run=Run(sh=f"pwd -P > {ran_in}")
    )
    monkeypatch.setenv("FLOORGUARD_HOME", str(tmp_path / "home"))
    for variable in ("FLOORGUARD_ADAPTER_FLOOR_POLICY", "FLOORGUARD_FLOOR_MAP"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(judged)
    monkeypatch.setattr(launcher, "_race_window_hook", lambda: os.chdir(elsewhere))
    child = floorguard.spawn("codex", ["exec", "task"], binary=str(codex))
    assert child.wait(timeout=30) == 0
    assert ran_in.read_text("utf-8").strip() == os.path.realpath(judged)
