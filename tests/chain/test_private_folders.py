"""Folders floorguard and floorctl create for state and keys are private whatever the umask.

Under a umask of 000 a folder made with the default mode is 0777: anyone on the machine may
rename the chain, its key or a signing key out of it and put their own in its place. Every
folder they create (the one named and each missing one above it) is 0700; folders that
exist already are left as they are.
"""

from __future__ import annotations

import stat
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers.cli import floorctl, isolated_env
from probes.native import native_program

PREFLIGHT = textwrap.dedent(
    """
    import sys, floorguard
    print(floorguard.preflight("goose", binary=sys.argv[1]).verdict)
    """
)


def _modes(top: Path, leaf: Path) -> dict[str, int]:
    """The mode of every folder from ``top`` (excluded) down to ``leaf``."""
    modes = {}
    for folder in [leaf, *leaf.parents]:
        if folder == top:
            break
        modes[str(folder.relative_to(top))] = stat.S_IMODE(folder.stat().st_mode)
    return modes


def test_the_state_home_and_the_folders_made_above_it_are_0700_under_umask_000(
    tmp_path: Path,
) -> None:
    binary = native_program(tmp_path / "goose", stdout=b"goose 1.9.0\n")
    home = tmp_path / "made" / "for" / "home"
    env = isolated_env(tmp_path, FLOORGUARD_HOME=str(home))
    done = subprocess.run(
        [sys.executable, "-c", PREFLIGHT, str(binary)],
        env=env, capture_output=True, text=True, timeout=120, check=False, umask=0,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "permit"
    assert _modes(tmp_path, home) == {"made": 0o700, "made/for": 0o700, "made/for/home": 0o700}


def test_keygen_makes_its_folder_and_those_above_it_0700_under_umask_000(tmp_path: Path) -> None:
    done = floorctl("keygen", "--out", "a/b/keys", cwd=tmp_path, state=tmp_path / "s", umask=0)
    assert done.returncode == 0, done.stderr
    keys = tmp_path / "a" / "b" / "keys"
    assert _modes(tmp_path, keys) == {"a": 0o700, "a/b": 0o700, "a/b/keys": 0o700}
    assert stat.S_IMODE((keys / "signing.key").stat().st_mode) == 0o600


def test_folders_that_exist_keep_their_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    done = floorctl("keygen", "--out", "shared/keys", cwd=tmp_path, state=tmp_path / "s")
    assert done.returncode == 0, done.stderr
    assert _modes(tmp_path, shared / "keys") == {"shared": 0o755, "shared/keys": 0o700}
