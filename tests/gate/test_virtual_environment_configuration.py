"""A virtual environment's ``pyvenv.cfg`` is read as CPython's ``site`` reads it.

``site`` includes the system site-packages, and with them the user site, unless
``include-system-site-packages`` says ``true`` in a line with ``=``, read in UTF-8 and split
at line ends as text mode splits them; a file without the key includes them. Whatever the
file makes ``site`` load must be what the gate judged: here the user site holds a
``usercustomize`` that runs a below-floor aider's code before the at-floor one starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, World, old_aider_code

pytestmark = pytest.mark.attack

INCLUDED = {
    "no key": "home = {home}\n",
    "no equals sign": "home = {home}\ninclude-system-site-packages: false\n",
    "byte order mark": "\ufeffinclude-system-site-packages = false\nhome = {home}\n",
    "after a next line": "home = {home}\x85include-system-site-packages = false\n",
    "after a form feed": "home = {home}\x0cinclude-system-site-packages = false\n",
    "key in capitals": "home = {home}\nINCLUDE-SYSTEM-SITE-PACKAGES = True\n",
}


def _user_site(world: World) -> Path:
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = world.home / ".local" / "lib" / version / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    return site


def _configure(prefix: Path, text: str) -> None:
    home = Path(sys.executable).resolve().parent
    (prefix / "pyvenv.cfg").write_bytes(text.format(home=home).encode("utf-8"))


@pytest.mark.parametrize("config", sorted(INCLUDED))
def test_a_configuration_site_reads_as_including_the_user_site_is_judged_so(
    world: World, config: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    (_user_site(world) / "usercustomize.py").write_text(old_aider_code(old.site), encoding="utf-8")
    _configure(new.prefix, INCLUDED[config])
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"))
    world.assert_refused(outcome, old.marker, "usercustomize")


def test_a_configuration_that_leaves_the_user_site_out_runs_the_at_floor_aider(
    world: World,
) -> None:
    old, new = world.old_aider(), world.new_aider()
    (_user_site(world) / "usercustomize.py").write_text(old_aider_code(old.site), encoding="utf-8")
    _configure(new.prefix, "home = {home}\ninclude-system-site-packages = false\n")
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"))
    world.assert_permitted_and_ran(outcome, new.marker)
    assert not old.marker.exists()


@pytest.mark.parametrize(("value", "user_site"), [("0", True), ("-0", True), (" +00", True),
                                                  ("1", False), ("no", False)])  # fmt: skip
def test_the_user_site_switch_is_read_as_cpython_reads_it(
    world: World, value: str, user_site: bool
) -> None:
    # PYTHONNOUSERSITE is an integer flag: 0 in any spelling leaves the user site on; any
    # other integer, or text, turns it off.
    old, new = world.old_aider(), world.new_aider()
    (_user_site(world) / "usercustomize.py").write_text(old_aider_code(old.site), encoding="utf-8")
    _configure(new.prefix, "home = {home}\ninclude-system-site-packages = true\n")
    env = world.env(new.prefix / "bin", PYTHONNOUSERSITE=value)
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=env)
    if user_site:
        world.assert_refused(outcome, old.marker, "usercustomize")
    else:
        assert not old.marker.exists(), outcome
        assert "usercustomize" not in outcome.reason, outcome


def _linked_prefix(world: World, code: str) -> Path:
    """A prefix of links to this Python's files, with a site-packages of its own whose
    sitecustomize runs ``code``. Returns the prefix."""
    real = Path(os.path.realpath(sys.executable))
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    stdlib = real.parent.parent / "lib" / version
    linked = world.root / "linked-prefix"
    (linked / "bin").mkdir(parents=True)
    (linked / "bin" / real.name).symlink_to(real)
    (linked / "lib" / version / "site-packages").mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            (linked / "lib" / version / entry.name).symlink_to(entry)
    (linked / "lib" / version / "site-packages" / "sitecustomize.py").write_text(
        code, encoding="utf-8"
    )
    return linked


def test_the_base_installation_is_the_one_pyvenv_cfg_home_names(world: World) -> None:
    # A virtual environment made by a python reached through a prefix of links: CPython
    # takes the base installation from pyvenv.cfg's home (that prefix, with its own
    # site-packages), not from the interpreter's real file. A sitecustomize there runs.
    import subprocess

    from probes import pip_install

    old = world.old_aider()
    linked = _linked_prefix(world, old_aider_code(old.site))
    python = linked / "bin" / Path(os.path.realpath(sys.executable)).name
    env = world.root / "env"
    subprocess.run([str(python), "-m", "venv", "--without-pip", "--system-site-packages",
                    str(env)], check=True, timeout=120)  # fmt: skip
    marker = world.root / "env-ran"
    pip_install(env, dist="aider-chat", module="aider", version="0.70.0", marker=marker)
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(env / "bin"))
    world.assert_refused(outcome, old.marker, "sitecustomize")


@pytest.mark.parametrize("where", ["two home lines", "the folder above first"])
def test_the_home_is_the_one_getpath_reads(world: World, where: str) -> None:
    # getpath takes the first home line, from the pyvenv.cfg above bin/ before bin/'s own
    # (site reads bin/'s first for its other keys): that home's site-packages is the one
    # whose sitecustomize runs.
    old, new = world.old_aider(), world.new_aider()
    linked = _linked_prefix(world, old_aider_code(old.site))
    real = Path(os.path.realpath(sys.executable)).parent
    if where == "two home lines":
        _configure(new.prefix, f"home = {linked / 'bin'}\nhome = {{home}}\n"
                               "include-system-site-packages = true\n")  # fmt: skip
    else:
        (new.prefix / "pyvenv.cfg").write_text(f"home = {linked / 'bin'}\n", encoding="utf-8")
        (new.prefix / "bin" / "pyvenv.cfg").write_text(
            f"home = {real}\ninclude-system-site-packages = true\n", encoding="utf-8"
        )
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"))
    world.assert_refused(outcome, old.marker, "sitecustomize")


@pytest.mark.parametrize("flags", [[], ["-I"], ["-S"]])
def test_a_pth_file_beside_the_interpreter_is_refused(world: World, flags: list[str]) -> None:
    # getpath reads <interpreter>._pth beside the interpreter on Linux too, whatever the
    # options: its lines are the whole search path, here the below-floor aider's.
    old, new = world.old_aider(), world.new_aider()
    (new.prefix / "bin" / "python._pth").write_text(f"{old.site}\n", encoding="utf-8")
    outcome = world.spawn(
        "python", [*flags, "-P", "-m", "aider", "task"], policy=DEFAULT, binary=new.python,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "._pth")
