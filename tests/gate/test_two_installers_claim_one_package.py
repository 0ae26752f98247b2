"""Two installs that claim one package's files: which one's code is on disk cannot be told.

pip installed aider 0.70.0 (a dist-info); an older installer (``setup.py install``, a
distribution's package) then wrote aider 0.50.0 over the same files and left an egg-info.
The dist-info still says 0.70.0, and its RECORD still lists the files; the code is
0.50.0's. An egg-info of the distribution in the same site folder is a second claim, in
every form an installer leaves it; with two claims the version is unknown, and refused.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, World

pytestmark = pytest.mark.attack

PKG_INFO = "Metadata-Version: 2.1\nName: aider-chat\nVersion: 0.50.0\n"
EGG = "aider_chat-0.50.0-py3.11.egg-info"


def _egg_info(site: Path, form: str) -> None:
    if form == "single file":
        (site / EGG).write_text(PKG_INFO, encoding="utf-8")
        return
    folder = site / EGG
    folder.mkdir()
    (folder / "PKG-INFO").write_text(PKG_INFO, encoding="utf-8")
    if form == "folder with top_level.txt":
        (folder / "top_level.txt").write_text("aider\n", encoding="utf-8")
    else:
        (folder / "installed-files.txt").write_text(
            "../aider/__init__.py\n../aider/main.py\nPKG-INFO\n", encoding="utf-8"
        )


@pytest.mark.parametrize(
    "form", ["folder with top_level.txt", "folder with installed-files.txt", "single file"]
)
@pytest.mark.parametrize("how", ["console script", "python -P -m aider"])
def test_an_egg_info_over_a_pip_install_leaves_the_version_unknown(
    world: World, form: str, how: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    shutil.rmtree(new.site / "aider")
    shutil.copytree(old.site / "aider", new.site / "aider")  # the 0.50.0 code, over the files
    _egg_info(new.site, form)
    if how == "console script":
        outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"))
    else:
        outcome = world.spawn(
            "python", ["-P", "-m", "aider", "task"], policy=DEFAULT, binary=new.python,
            env=world.env(),
        )  # fmt: skip
    world.assert_refused(outcome, old.marker)
    assert outcome["version"] != "0.70.0", outcome


def test_an_egg_info_of_another_distribution_changes_nothing(world: World) -> None:
    new = world.new_aider()
    (new.site / "requests-2.0.0-py3.11.egg-info").write_text(
        "Metadata-Version: 2.1\nName: requests\nVersion: 2.0.0\n", encoding="utf-8"
    )
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"))
    world.assert_permitted_and_ran(outcome, new.marker)
