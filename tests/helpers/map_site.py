"""A folder holding a release key and three floor-map modules of aider, for publish and
refresh runs: newer.py (version 8, floor 0.70.0), older.py (7, 0.60.0) and same.py (8,
another map at the same version)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hosts import floor, map_module

from helpers.cli import floorctl


def make_site(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    assert floorctl("keygen", "--out", "keys", cwd=root, state=tmp_path / "s").returncode == 0
    (root / "newer.py").write_text(map_module({"aider": floor("0.70.0")}, version=8))
    (root / "older.py").write_text(map_module({"aider": floor("0.60.0")}, version=7))
    (root / "same.py").write_text(map_module({"aider": floor("0.71.0")}, version=8))
    return root


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    assert "Traceback" not in done.stdout, done.stdout
