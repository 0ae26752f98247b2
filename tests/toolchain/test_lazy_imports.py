"""What ``refresh --check`` loads: a CI step on a module in sync needs none of the heavy
libraries (jsonschema for a clean feed, jinja2 with nothing to render, cryptography with
nothing to sign, httpx and anyio with no URL). Read from ``python -X importtime`` of the
real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers.cli import isolated_env

REPO = Path(__file__).resolve().parents[2]
HEAVY = {"jsonschema", "jinja2", "cryptography", "httpx", "anyio"}


def loaded(args: list[str], cwd: Path, state: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "floorctl", *args],
        cwd=cwd,
        env=isolated_env(state),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in lines}


def test_refresh_check_of_the_shipped_feed_loads_no_heavy_library(tmp_path: Path) -> None:
    modules = loaded(
        ["refresh", "--feed", "feeds/example.v1.json", "--check"], REPO, tmp_path / "state"
    )
    assert "floorctl" in modules and "click" in modules
    assert not modules & HEAVY, modules & HEAVY


def test_a_refresh_that_renders_and_signs_loads_what_it_needs(tmp_path: Path) -> None:
    # The other side: the same reading loads jinja2 to render and cryptography to sign.
    (tmp_path / "feed.json").write_bytes((REPO / "feeds" / "example.v1.json").read_bytes())
    (tmp_path / "m.py").write_text("# floor-map:begin\n# floor-map:end\n")
    args = ["refresh", "--feed", "feed.json", "--module", "m.py", "--write"]
    modules = loaded([*args, "--receipt-out", "r.dsse"], tmp_path, tmp_path / "state")
    assert {"jinja2", "cryptography"} <= modules
    assert not modules & {"httpx", "anyio"}
