"""A distribution pip installs into a folder of the installer's choosing (``pip install
--target DIR``: the wheel's files and its dist-info side by side, in a folder named
``vendor``, ``python`` as AWS Lambda layers name it, ``lib``, anything) is found from its
dist-info as it is in a ``site-packages``: a file its RECORD lists is the package's code, at
the version its metadata states, whatever the folder is called.

Real files, a real virtual environment's Python, the gate in a host process of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import World


def _target_install(folder: Path, version: str, marker: Path) -> Path:
    """aider-chat ``version`` as ``pip install --target folder`` lays it out; its
    ``scrape.py``, which leaves ``marker`` when run."""
    package = folder / "aider"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    scrape = package / "scrape.py"
    scrape.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n", encoding="utf-8")
    info = folder / f"aider_chat-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: aider-chat\nVersion: {version}\n", encoding="utf-8"
    )
    (info / "top_level.txt").write_text("aider\n", encoding="utf-8")
    (info / "RECORD").write_text(
        f"aider/__init__.py,,\naider/scrape.py,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n",
        encoding="utf-8",
    )
    return scrape


@pytest.mark.parametrize("name", ["vendor", "python", "lib", "deps"])
def test_a_file_of_a_below_floor_distribution_in_a_target_folder_is_that_package(
    world: World, untracked_policy: str, tmp_path: Path, name: str
) -> None:
    new = world.new_aider()
    marker = tmp_path / "old-ran"
    scrape = _target_install(tmp_path / "elsewhere" / name, "0.50.0", marker)
    outcome = world.spawn(
        "python", [str(scrape)], binary=new.python, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, marker, "aider")


@pytest.mark.parametrize("spelling", ["absolute", "climbing back", "plain"])
def test_a_module_its_record_lists_by_any_spelling_of_its_place_is_the_packages(
    world: World, untracked_policy: str, tmp_path: Path, spelling: str
) -> None:
    """A top-level module beside the package (outside it), listed in RECORD as an absolute
    path or as ``../vendor/aider_cli.py`` (both name the same file: the packaging spec
    allows absolute paths, installers write ``..``-relative ones)."""
    new = world.new_aider()
    marker = tmp_path / "old-ran"
    folder = tmp_path / "elsewhere" / "vendor"
    _target_install(folder, "0.50.0", tmp_path / "unused")
    module = folder / "aider_cli.py"
    module.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n", encoding="utf-8")
    listed = {"absolute": str(module), "climbing back": "../vendor/aider_cli.py",
              "plain": "aider_cli.py"}[spelling]  # fmt: skip
    record = folder / "aider_chat-0.50.0.dist-info" / "RECORD"
    record.write_text(record.read_text(encoding="utf-8") + f"{listed},,\n", encoding="utf-8")
    outcome = world.spawn(
        "python", [str(module)], binary=new.python, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, marker, "aider")
