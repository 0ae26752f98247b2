"""The floorctl-check pre-commit hook, installed by the real pre-commit from a clone of this
repository at a tag, as a consumer's ``.pre-commit-config.yaml`` names it.

pre-commit installs the repository into the hook's environment; the runtime it depends on
(floorguard) comes from the same clone, so no package index needs to hold our code. The
hook exits 0 when the module matches its feeds, 1 when it is stale, 2 on a bad
configuration (pre-commit itself then exits 1 and reports the hook's code).

Needs the toolchain's dependencies from ``FLOORGUARD_TEST_WHEELHOUSE`` (a folder; .ci/run
fills it), installed with no index: not part of the default run (marker ``wheelhouse``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheelhouse

ROOT = Path(__file__).resolve().parents[2]
TAG = "v0.0.0-hook-test"


@pytest.fixture(scope="module")
def consumer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A host project whose .pre-commit-config.yaml names a clone of this repository at a
    tag, and the environment pre-commit runs in (the wheelhouse as its only index)."""
    wheelhouse = os.environ.get("FLOORGUARD_TEST_WHEELHOUSE")
    if not wheelhouse:
        pytest.skip("FLOORGUARD_TEST_WHEELHOUSE is not set (.ci/run sets it)")
    base = tmp_path_factory.mktemp("hook")
    clone = base / "floorguard"
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run([*git, "-C", str(clone), "tag", TAG], check=True)
    host = base / "host"
    (host / "feeds").mkdir(parents=True)
    shutil.copy(ROOT / "feeds" / "example.v1.json", host / "feeds" / "example.v1.json")
    shutil.copy(ROOT / "generated" / "floorguard" / "floor_map.py", host / "floor_map.py")
    (host / "pyproject.toml").write_text(
        '[tool.floorctl]\nfeeds = ["feeds/example.v1.json"]\nmodule = "floor_map.py"\n'
    )
    (host / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {clone}\n    rev: {TAG}\n    hooks:\n      - id: floorctl-check\n"
    )
    subprocess.run(["git", "init", "-q", str(host)], check=True)
    subprocess.run([*git, "-C", str(host), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(host), "commit", "-q", "-m", "host"], check=True)
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "VIRTUAL"))
    }
    env.update(PRE_COMMIT_HOME=str(base / "cache"), PIP_NO_INDEX="1", PIP_FIND_LINKS=wheelhouse)
    return host, env


def _hook(host: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "floorctl-check"],
        cwd=host, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_the_hook_passes_when_the_module_matches_its_feeds(
    consumer: tuple[Path, dict[str, str]],
) -> None:
    host, env = consumer
    done = _hook(host, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout


def test_the_hook_fails_the_commit_with_exit_1_when_the_module_is_stale(
    consumer: tuple[Path, dict[str, str]],
) -> None:
    host, env = consumer
    feed = host / "feeds" / "example.v1.json"
    original = feed.read_text()
    feed.write_text(original.replace('"0.60.0"', '"0.61.0"', 1))
    try:
        done = _hook(host, env)
    finally:
        feed.write_text(original)
    assert done.returncode == 1
    assert "exit code: 1" in done.stdout and "stale" in done.stdout


def test_the_hook_exits_2_on_a_bad_configuration(consumer: tuple[Path, dict[str, str]]) -> None:
    host, env = consumer
    config = host / "pyproject.toml"
    original = config.read_text()
    config.write_text(original + "bogus = 1\n")
    try:
        done = _hook(host, env)
    finally:
        config.write_text(original)
    assert done.returncode == 1
    assert "exit code: 2" in done.stdout and "unknown key 'bogus'" in done.stdout
