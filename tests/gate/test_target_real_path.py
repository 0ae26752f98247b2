"""The file a name leads to is resolved as the kernel resolves it (one lookup), and as
``os.path.realpath`` does wherever the kernel cannot name it: the same path either way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from floorguard._identify.target import open_target, real_path
from floorguard.errors import BinaryNotFoundError, DetectionError


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "real" / "bin").mkdir(parents=True)
    program = tmp_path / "real" / "bin" / "tool"
    program.write_bytes(b"\x7fELF")
    program.chmod(0o755)
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "absolute").symlink_to(program)
    (tmp_path / "links" / "relative").symlink_to(Path("..") / "real" / "bin" / "tool")
    (tmp_path / "links" / "chained").symlink_to("absolute")
    (tmp_path / "links" / "folder").symlink_to(tmp_path / "real" / "bin")
    (tmp_path / "links" / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "links" / "loop").symlink_to("loop")
    return tmp_path


@pytest.mark.parametrize(
    "name",
    [
        "real/bin/tool",
        "links/absolute",
        "links/relative",
        "links/chained",
        "links/folder/tool",
        "links/folder/../bin/tool",  # (``..`` after a link steps out of its target)
        "real//bin/./tool",
        "real/bin/tool/",  # a trailing slash after a file: the kernel refuses it
        "links/dangling",
        "links/loop",
        "real/bin/missing",
        "real/bin/tool/inside",
        "real/bin",
    ],
)
def test_resolves_as_realpath_does(tree: Path, name: str) -> None:
    located = f"{tree}/{name}"
    assert real_path(located) == os.path.realpath(located)


def test_a_link_swapped_after_one_resolution_is_followed_anew(tree: Path) -> None:
    link = tree / "links" / "moving"
    link.symlink_to(tree / "real" / "bin" / "tool")
    assert real_path(str(link)) == str(tree / "real" / "bin" / "tool")
    other = tree / "real" / "other"
    other.write_bytes(b"\x7fELF")
    link.unlink()
    link.symlink_to(other)
    assert real_path(str(link)) == str(other)  # (nothing of the first resolution is kept)


def test_open_target_still_refuses_what_cannot_be_opened(tree: Path) -> None:
    with pytest.raises(BinaryNotFoundError):
        open_target(str(tree / "links" / "dangling"), path_env=None)
    with pytest.raises(DetectionError, match="cannot be opened"):
        open_target(str(tree / "links" / "loop"), path_env=None)
    with pytest.raises(DetectionError, match="not a regular file"):
        open_target(str(tree / "links" / "folder"), path_env=None)
    with open_target(str(tree / "links" / "relative"), path_env=None) as opened:
        assert opened.path == tree / "real" / "bin" / "tool"
