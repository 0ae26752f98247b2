"""Which site folders a Python reads, and in which order, depends on its build: upstream
CPython (pyenv, python.org, the official images) reads ``lib/pythonX.Y/site-packages``
alone; Debian's reads ``local/lib/pythonX.Y/dist-packages``, ``lib/python3/dist-packages``
and ``lib/pythonX.Y/dist-packages``, and ``site-packages`` first only in a virtual
environment; Fedora's puts ``lib64`` and ``local`` first. Every build reads a virtual
environment's own ``site-packages`` first and the user site (``USERBASE/lib/pythonX.Y/
site-packages``, the only one) next. An adapter installed in two folders whose order the
build decides cannot be judged from one of them: refused, naming both. A copy in the one
folder every build reads first is judged as before.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, PY, World
from probes import pip_install, plain_interpreter, site_packages

pytestmark = pytest.mark.attack


def _installed_in(world: World, folder: Path, version: str, name: str) -> Path:
    """aider-chat ``version`` as pip installs it (package, dist-info with its RECORD), moved
    into ``folder``; returns the marker its code touches when it runs."""
    scratch = world.root / f"scratch-{name}"
    marker = world.root / f"{name}-ran"
    pip_install(scratch, dist="aider-chat", module="aider", version=version, marker=marker)
    folder.mkdir(parents=True, exist_ok=True)
    for entry in site_packages(scratch).iterdir():
        if entry.name == "aider" or entry.name.startswith("aider_chat-"):
            shutil.move(str(entry), str(folder / entry.name))
    return marker


def _plain_python(world: World) -> tuple[Path, Path]:
    prefix = world.root / "up"
    python = plain_interpreter(prefix)
    if python is None:
        pytest.skip("this interpreter cannot be relocated")
    return prefix, python


@pytest.mark.parametrize(
    "elsewhere",
    ["lib/python3/dist-packages", f"lib/{PY}/dist-packages", f"local/lib/{PY}/dist-packages"],
)
def test_an_adapter_in_two_folders_whose_order_the_build_decides_is_refused(
    world: World, elsewhere: str
) -> None:
    # Upstream CPython runs the site-packages copy (below the floor); Debian's would run
    # the other. Either way the gate cannot tell from files which one this build reads.
    prefix, python = _plain_python(world)
    old = _installed_in(world, prefix / "lib" / PY / "site-packages", "0.50.0", "old")
    _installed_in(world, prefix / elsewhere, "0.70.0", "new")
    outcome = world.spawn(
        "python", ["-P", "-m", "aider", "task"], policy=DEFAULT, binary=python, env=world.env()
    )
    world.assert_refused(outcome, old, "site folders")


def test_a_user_folder_no_build_reads_does_not_stand_for_the_user_site(world: World) -> None:
    # USERBASE/lib/python3/dist-packages is read by no CPython: the user site is
    # USERBASE/lib/pythonX.Y/site-packages alone, whose copy (below the floor) runs.
    _prefix, python = _plain_python(world)
    user = world.home / ".local"
    old = _installed_in(world, user / "lib" / PY / "site-packages", "0.50.0", "old")
    _installed_in(world, user / "lib" / "python3" / "dist-packages", "0.70.0", "new")
    outcome = world.spawn(
        "python", ["-P", "-m", "aider", "task"], policy=DEFAULT, binary=python, env=world.env()
    )
    world.assert_refused(outcome, old, "below the floor")


def test_a_venv_copy_is_the_one_every_build_runs_first(world: World) -> None:
    # A virtual environment's own site-packages comes first in every build: its copy runs,
    # whatever the base installation holds in the folders its build orders.
    prefix, python = _plain_python(world)
    _installed_in(world, prefix / "lib" / PY / "site-packages", "0.50.0", "old")
    _installed_in(world, prefix / "lib" / "python3" / "dist-packages", "0.50.0", "older")
    env = world.root / "env"
    subprocess.run(
        [str(python), "-m", "venv", "--without-pip", "--system-site-packages", str(env)],
        check=True, timeout=120,
    )  # fmt: skip
    marker = world.root / "env-ran"
    pip_install(env, dist="aider-chat", module="aider", version="0.70.0", marker=marker)
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(env / "bin"))
    world.assert_permitted_and_ran(outcome, marker)


# ---------------------------------------------------------------- installs by link

LINKED = [
    "the package folder",
    "its files",
    "a direct_url.json that says editable",
    "a direct_url.json that is no JSON",
    "a direct_url.json whose dir_info is no object",
    "a direct_url.json whose editable is no boolean",
]
_DIRECT_URLS = {
    "a direct_url.json that says editable":
        '{"url": "file:///src/aider", "dir_info": {"editable": true}}',
    "a direct_url.json that is no JSON": '{"url": "file:///src/aider", ',
    "a direct_url.json whose dir_info is no object": '{"url": "file:///src/aider", "dir_info": 1}',
    "a direct_url.json whose editable is no boolean":
        '{"url": "file:///src/aider", "dir_info": {"editable": "yes"}}',
}  # fmt: skip


@pytest.mark.parametrize("linked", LINKED)
def test_an_install_that_links_to_its_source_or_says_it_is_editable_is_refused(
    world: World, linked: str
) -> None:
    """``flit install --symlink`` (and any install whose files are links) leaves a dist-info
    stating the version at install time beside code that is whatever the checkout holds
    now, here an older tag; an installer's ``direct_url.json`` says so of an editable one."""
    new = world.new_aider()
    old = world.old_aider()
    package = new.site / "aider"
    checkout = world.root / "checkout" / "aider"
    shutil.copytree(old.site / "aider", checkout)
    if linked == "the package folder":
        shutil.rmtree(package)
        package.symlink_to(checkout)
    elif linked == "its files":
        for module in ("main.py", "__main__.py"):
            (package / module).unlink()
            (package / module).symlink_to(checkout / module)
    else:
        shutil.rmtree(package)
        shutil.copytree(checkout, package)  # (the old code, in place)
        [info] = new.site.glob("aider_chat-*.dist-info")
        (info / "direct_url.json").write_text(_DIRECT_URLS[linked], encoding="utf-8")
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"))
    world.assert_refused(outcome, old.marker, "link", "editable")


@pytest.mark.parametrize(
    "stated",
    ['{"url": "file:///w/aider_chat-0.70.0-py3-none-any.whl", "archive_info": {}}',
     '{"url": "file:///src/aider", "dir_info": {"editable": false}}',
     '{"url": "file:///src/aider", "dir_info": {}}'],
)  # fmt: skip
def test_an_install_by_copy_beside_a_direct_url_json_of_a_wheel_runs(
    world: World, stated: str
) -> None:
    # pip writes direct_url.json for an install from a URL, a file or a folder (not
    # editable) too: its files are copies.
    new = world.new_aider()
    [info] = new.site.glob("aider_chat-*.dist-info")
    (info / "direct_url.json").write_text(stated, encoding="utf-8")
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"))
    world.assert_permitted_and_ran(outcome, new.marker)
