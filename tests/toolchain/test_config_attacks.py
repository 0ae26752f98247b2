"""The `[tool.floorctl]` configuration and the feed flags under attack: credentials in a feed
URL are refused without being repeated, a FIFO as the nearest pyproject.toml is a usage
error (not a hang), and a broken configuration never hides the help that explains it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers.cli import floorctl
from helpers.release import (
    SOURCE,
)

pytestmark = pytest.mark.attack

PASSWORD = "s3cret-feed-password"


def _project_with_url_feed(root: Path) -> Path:
    (root / "mod").mkdir(parents=True)
    shutil.copyfile(SOURCE / "floorguard" / "floor_map.py", root / "mod" / "floor_map.py")
    (root / "pyproject.toml").write_text(
        "[tool.floorctl]\n"
        f'feeds = ["https://reader:{PASSWORD}@feeds.example.org/floors.json"]\n'
        'module = "mod/floor_map.py"\n'
    )
    return root


def test_a_configured_feed_url_with_credentials_is_refused_without_repeating_them(
    tmp_path: Path,
) -> None:
    root = _project_with_url_feed(tmp_path / "project")
    done = floorctl("refresh", "--check", cwd=root, state=tmp_path / "state")
    assert done.returncode == 2
    assert "feeds[0] is a URL with credentials" in done.stderr
    assert PASSWORD not in done.stderr + done.stdout


def test_a_feed_flag_with_credentials_is_refused_without_repeating_them(tmp_path: Path) -> None:
    done = floorctl(
        "refresh", "--feed", "https://reader:hunter2@feeds.example.org/f.json",
        "--module", SOURCE / "floorguard" / "floor_map.py",
        cwd=tmp_path, state=tmp_path / "state",
    )  # fmt: skip
    assert done.returncode == 1
    assert "credentials in URLs are not supported" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    assert "https://feeds.example.org/f.json" in done.stderr


def test_a_fifo_as_the_nearest_pyproject_is_a_usage_error_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pyproject.toml")
    done = floorctl("refresh", "--check", cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 2
    assert "pyproject.toml: not a regular file" in done.stderr


@pytest.mark.parametrize("args", [("refresh", "--help"), ("chain", "checkpoint", "-h")])
def test_a_broken_configuration_never_hides_the_help_that_explains_it(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.floorctl]\nbogus = 1\n")
    done = floorctl(*args, cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: floorctl {' '.join(args[:-1])} [OPTIONS]")
    # Without help the same configuration is still refused.
    done = floorctl(*args[:-1], cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 2
    assert "unknown key 'bogus'" in done.stderr
