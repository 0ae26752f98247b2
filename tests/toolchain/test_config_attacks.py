"""The `[tool.floorctl]` configuration and the feed flags under attack: credentials in a feed
URL are refused without being repeated, a FIFO as the nearest pyproject.toml is a usage
error (not a hang), and a broken configuration never hides the help that explains it."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("at", ["\uff20", "\ufe6b"], ids=["fullwidth", "small"])
def test_a_configured_feed_url_whose_at_sign_is_a_look_alike_is_refused_without_its_text(
    tmp_path: Path, at: str
) -> None:
    # NFKC reads these as "@": to any normalising reader the URL holds credentials.
    root = _project_with_url_feed(tmp_path / "project")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("@", at))
    done = floorctl("refresh", "--check", cwd=root, state=tmp_path / "state")
    assert done.returncode == 2, done.stderr
    assert "feeds[0]" in done.stderr
    assert PASSWORD not in done.stderr + done.stdout


@pytest.mark.parametrize("at", ["\uff20", "\ufe6b"], ids=["fullwidth", "small"])
def test_a_feed_flag_whose_at_sign_is_a_look_alike_is_refused_without_its_text(
    tmp_path: Path, at: str
) -> None:
    done = floorctl(
        "refresh", "--feed", f"https://reader:hunter2{at}feeds.example.org/f.json",
        "--module", SOURCE / "floorguard" / "floor_map.py",
        cwd=tmp_path, state=tmp_path / "state",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "printable ASCII" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout


def test_a_feed_flag_with_credentials_and_an_upper_case_scheme_is_not_named(
    tmp_path: Path,
) -> None:
    done = floorctl(
        "refresh", "--feed", "HTTPS://reader:hunter2@feeds.example.org/f.json",
        "--module", SOURCE / "floorguard" / "floor_map.py",
        cwd=tmp_path, state=tmp_path / "state",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "hunter2" not in done.stderr + done.stdout


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


# What TOML allows but no path or Python's reader can take: each a usage error naming the file
# (and the key), never a traceback, so the pre-commit hook reports a bad configuration (2)
# rather than a stale module (1).
GOOD_TABLE = '[tool.floorctl]\nfeeds = ["feed.json"]\nmodule = "mod/floor_map.py"\n'


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        pytest.param(
            GOOD_TABLE.replace('"feed.json"', '"feed\\u0000.json"'),
            ("feeds[0]", "NUL"),
            id="nul-in-a-feed",
        ),
        pytest.param(
            GOOD_TABLE.replace('"mod/floor_map.py"', '"mod/floor\\u0000map.py"'),
            ("module", "NUL"),
            id="nul-in-the-module",
        ),
        pytest.param(
            GOOD_TABLE + 'signing-key = "k\\u0000ey"\n',
            ("signing-key", "NUL"),
            id="nul-in-a-key-path",
        ),
        pytest.param(
            GOOD_TABLE + 'template = "t/\\u0000.j2"\n', ("template", "NUL"), id="nul-in-a-template"
        ),
        pytest.param(
            GOOD_TABLE + "[tool.other]\nx = " + "[" * 5000 + "]" * 5000 + "\n",
            ("invalid TOML", "nested too deeply"),
            id="deeply-nested-array",
        ),
        pytest.param(
            GOOD_TABLE + "[tool.other]\nx = " + "9" * 5000 + "\n",
            ("invalid TOML", "too large"),
            id="5000-digit-integer",
        ),
    ],
)
def test_a_configuration_no_path_or_reader_can_take_is_a_usage_error(
    tmp_path: Path, text: str, fragments: tuple[str, ...]
) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    done = floorctl("refresh", "--check", cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("floorctl: error: pyproject.toml: ")
    for fragment in fragments:
        assert fragment in line
    done = floorctl("refresh", "--check", "--json", cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["exit_status"] == 2
