"""A closed world at the spawn, ``python -m NAME`` and ``python DIR``: the file judged is the
one CPython's path finder takes, in its order. In one folder a package (a folder with an
``__init__``) comes before a module file of the same name, and a module file before a
namespace package (a folder without one); of one name, an extension module comes before
source, source before bytecode; a namespace package run with ``-m`` runs its
``__main__``. A file the finder would take first that is not source the gate reads is
refused, naming it.

Every test runs under the default policy and under deny-by-default.
"""

from __future__ import annotations

import importlib.machinery
from pathlib import Path

from helpers.closed_world import DENY_BY_DEFAULT, RUN_AIDER, World, old_aider_code

# The suffix CPython tries first for an extension module ("cpython-311-x86_64-linux-gnu.so").
EXTENSION = importlib.machinery.EXTENSION_SUFFIXES[0]
# Not a loadable library: whether it would load is beside the point, it is what runs first.
NOT_A_LIBRARY = b"\x7fELF planted"


def package(lib: Path, name: str, *, init: str | None, main: str) -> Path:
    """``lib/name/`` with ``__main__.py`` holding ``main``, and ``__init__.py`` holding
    ``init`` (None: a namespace package, no ``__init__`` at all)."""
    folder = lib / name
    folder.mkdir(parents=True)
    (folder / "__main__.py").write_text(main, encoding="utf-8")
    if init is not None:
        (folder / "__init__.py").write_text(init, encoding="utf-8")
    return folder


def dash_m(world: World, lib: Path, name: str, python: Path, policy: str) -> dict[str, object]:
    return world.spawn("python", ["-P", "-m", name, "task"], binary=python, policy=policy,
                       env=world.env(PYTHONPATH=str(lib)))  # fmt: skip


def test_an_extension_init_beside_a_package_s_init_py_is_refused_naming_it(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    new = world.new_aider()
    lib = tmp_path / "lib"
    folder = package(lib, "runme", init="", main=RUN_AIDER)
    (folder / f"__init__{EXTENSION}").write_bytes(NOT_A_LIBRARY)
    outcome = dash_m(world, lib, "runme", new.python, untracked_policy)
    world.assert_refused(outcome, new.marker, f"__init__{EXTENSION}")


def test_an_extension_init_of_a_package_above_the_module_is_refused_naming_it(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    new = world.new_aider()
    lib = tmp_path / "lib"
    top = lib / "runme"
    package(top, "sub", init="", main=RUN_AIDER)
    (top / "__init__.py").write_text("", encoding="utf-8")
    (top / "__init__.abi3.so").write_bytes(NOT_A_LIBRARY)
    outcome = world.spawn("python", ["-P", "-m", "runme.sub", "task"], binary=new.python,
                          policy=untracked_policy, env=world.env(PYTHONPATH=str(lib)))  # fmt: skip
    world.assert_refused(outcome, new.marker, "__init__.abi3.so")


def test_a_package_is_run_before_a_module_of_the_same_name_beside_it(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``lib/runme.py`` runs the at-floor aider; ``lib/runme/`` (a package, which the finder
    takes first) runs the old one: the package is what is judged."""
    new, old = world.new_aider(), world.old_aider()
    lib = tmp_path / "lib"
    package(lib, "runme", init="", main=old_aider_code(old.site))
    (lib / "runme.py").write_text(RUN_AIDER, encoding="utf-8")
    outcome = dash_m(world, lib, "runme", new.python, untracked_policy)
    world.assert_refused(outcome, old.marker, "sys.path", "runme/__main__.py")


def test_a_module_is_run_before_a_namespace_package_of_the_same_name_beside_it(
    world: World, tmp_path: Path
) -> None:
    new, old = world.new_aider(), world.old_aider()
    lib = tmp_path / "lib"
    package(lib, "runme", init=None, main=old_aider_code(old.site))
    (lib / "runme.py").write_text(RUN_AIDER, encoding="utf-8")
    outcome = dash_m(world, lib, "runme", new.python, DENY_BY_DEFAULT)
    world.assert_permitted_and_ran(outcome, new.marker)
    assert not old.marker.exists()


def test_a_namespace_package_s_main_is_judged_as_the_program(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python -m runme`` of a folder without ``__init__`` runs ``runme/__main__.py``: run
    by the old aider's python, it imports the old aider, and is refused as that."""
    old = world.old_aider()
    lib = tmp_path / "lib"
    package(lib, "runme", init=None, main=RUN_AIDER)
    outcome = dash_m(world, lib, "runme", old.python, untracked_policy)
    world.assert_refused(outcome, old.marker, "0.50.0")
    assert "below the floor" in outcome.reason, outcome.reason


def test_a_namespace_package_s_main_importing_the_at_floor_aider_runs(
    world: World, tmp_path: Path
) -> None:
    new = world.new_aider()
    lib = tmp_path / "lib"
    package(lib, "runme", init=None, main=RUN_AIDER)
    outcome = dash_m(world, lib, "runme", new.python, DENY_BY_DEFAULT)
    world.assert_permitted_and_ran(outcome, new.marker)


def test_a_namespace_package_s_main_is_found_in_a_later_portion(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """Two portions of ``runme`` on the path: the first holds no ``__main__``, the second's
    is run."""
    old = world.old_aider()
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "runme").mkdir(parents=True)
    (first / "runme" / "other.py").write_text("", encoding="utf-8")
    package(second, "runme", init=None, main=RUN_AIDER)
    outcome = world.spawn("python", ["-P", "-m", "runme", "task"], binary=old.python,
                          policy=untracked_policy,
                          env=world.env(PYTHONPATH=f"{first}:{second}"))  # fmt: skip
    world.assert_refused(outcome, old.marker, "0.50.0")


def test_a_folder_program_whose_main_the_finder_takes_as_an_extension_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    new = world.new_aider()
    app = tmp_path / "app"
    app.mkdir()
    (app / "__main__.py").write_text(RUN_AIDER, encoding="utf-8")
    (app / f"__main__{EXTENSION}").write_bytes(NOT_A_LIBRARY)
    outcome = world.spawn("python", [str(app), "task"], binary=new.python,
                          policy=untracked_policy, env=world.env())  # fmt: skip
    world.assert_refused(outcome, new.marker, f"__main__{EXTENSION}")


def test_a_folder_program_whose_main_is_a_package_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    new = world.new_aider()
    app = tmp_path / "app"
    package(app, "__main__", init="", main=RUN_AIDER)
    (app / "__main__.py").write_text(RUN_AIDER, encoding="utf-8")
    outcome = world.spawn("python", [str(app), "task"], binary=new.python,
                          policy=untracked_policy, env=world.env())  # fmt: skip
    world.assert_refused(outcome, new.marker, "__main__")
