"""The ``floorctl-check`` pre-commit hook: its entry run as pre-commit runs it (entry, then
args, no file names, from the repository root) in a git repository whose only floorctl
setting is its pyproject.toml."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.cli import isolated_env
from helpers.release import (
    SHIPPED_FEED,
    SOURCE,
)

REPO = Path(__file__).resolve().parents[2]
CONFIG = """\
[project]
name = "host"

[tool.floorctl]
feeds = ["feeds/upstream.json"]
module = "src/host/floor_map.py"
"""


def hook() -> dict[str, Any]:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    (found,) = [h for h in hooks if h["id"] == "floorctl-check"]
    return dict(found)


def feed(floor: str) -> str:
    entry = {"min_safe_version": floor, "advisory_id": "BSA-0001", "note": "Upgrade."}
    return json.dumps({"schema_version": 1, "adapters": {"aider": entry}})


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def run_hook(repo: Path, state: Path) -> subprocess.CompletedProcess[str]:
    """What pre-commit executes: shlex-split entry + args (pass_filenames is false), from
    the root of the repository, with the hook's environment's scripts first on PATH."""
    spec = hook()
    argv = [*shlex.split(spec["entry"]), *spec.get("args", [])]
    scripts = Path(sys.executable).parent
    env = isolated_env(state, PATH=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a pyproject.toml, a feed and the module written from it."""
    repo = tmp_path / "repo"
    (repo / "feeds").mkdir(parents=True)
    (repo / "src" / "host").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(CONFIG)
    (repo / "feeds" / "upstream.json").write_text(feed("0.60.0"))
    (repo / "src" / "host" / "floor_map.py").write_text("# floor-map:begin\n# floor-map:end\n")
    scripts = Path(sys.executable).parent
    written = subprocess.run(
        [scripts / "floorctl", "refresh", "--write"],
        cwd=repo,
        env=isolated_env(tmp_path / "state"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert written.returncode == 0, written.stderr
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "host")
    return repo


def test_the_hook_runs_refresh_check_on_the_whole_project() -> None:
    spec = hook()
    assert spec["entry"] == "floorctl refresh --check"
    assert spec["language"] == "python"
    # The check is of the project, never of the staged file names pre-commit would append.
    assert spec["pass_filenames"] is False
    assert spec["always_run"] is True


def test_the_hook_passes_when_the_module_matches_the_feed(repo: Path, tmp_path: Path) -> None:
    done = run_hook(repo, tmp_path / "state")
    assert done.returncode == 0, done.stderr
    assert "src/host/floor_map.py: 1 adapters" in done.stdout


def test_the_hook_fails_when_the_feed_changed(repo: Path, tmp_path: Path) -> None:
    (repo / "feeds" / "upstream.json").write_text(feed("0.61.0"))
    done = run_hook(repo, tmp_path / "state")
    assert done.returncode == 1
    assert "src/host/floor_map.py: stale" in done.stderr
    assert "0.60.0' -> '0.61.0'" in done.stdout


def test_the_hook_fails_when_the_module_was_edited(repo: Path, tmp_path: Path) -> None:
    module = repo / "src" / "host" / "floor_map.py"
    module.write_text(module.read_text().replace("0.60.0", "0.10.0"))
    assert run_hook(repo, tmp_path / "state").returncode == 1


def test_the_hook_is_a_usage_error_for_an_unknown_key(repo: Path, tmp_path: Path) -> None:
    (repo / "pyproject.toml").write_text(CONFIG + 'feed = "feeds/upstream.json"\n')
    done = run_hook(repo, tmp_path / "state")
    assert done.returncode == 2
    assert done.stderr == (
        "floorctl: error: pyproject.toml: [tool.floorctl]: unknown key 'feed' "
        "(known: feeds, module, signing-key, template, trusted-keys, waivers)\n"
    )


def test_the_documented_snippet_uses_this_hook() -> None:
    page = (REPO / "docs" / "release.md").read_text()
    section = page.split("## pre-commit and a scheduled refresh", 1)[1]
    snippet = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (entry,) = yaml.safe_load(snippet)["repos"]
    assert [h["id"] for h in entry["hooks"]] == [hook()["id"]]
    assert entry["rev"]


@pytest.mark.slow
def test_the_pre_commit_hook_leaves_no_file_in_the_repository(
    tmp_path: Path,
) -> None:
    # The hook's documentation: it reads, never writes (a host repository ignores nothing).
    repo = tmp_path / "repo"
    (repo / "mod").mkdir(parents=True)
    shutil.copyfile(SOURCE / "floorguard" / "floor_map.py", repo / "mod" / "floor_map.py")
    shutil.copyfile(SHIPPED_FEED, repo / "feed.json")
    (repo / "pyproject.toml").write_text(
        '[tool.floorctl]\nfeeds = ["feed.json"]\nmodule = "mod/floor_map.py"\n'
    )
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "host")
    done = run_hook(repo, tmp_path / "state")
    assert done.returncode == 0, done.stderr
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert status.stdout == ""
