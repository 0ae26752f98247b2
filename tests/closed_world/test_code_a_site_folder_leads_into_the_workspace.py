"""An installation is judged as one only where the workspace cannot write it. A site folder
(or the standard library) that reaches into the working directory, through an editable
install's finder or a link, lets any import of a name it holds (an optional one included)
run the workspace's code inside a permitted agent: a doubt, as a ``.pth`` path line into
the working directory is. Real virtual environments, setuptools' own finder template, real
links; the spawn-level runs are in test_evasions.py's style below."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, World
from probes import real_venv, site_packages

from floorguard._identify import identify

FINDER = "__editable___zzoptional_1_0_finder"


@pytest.fixture
def venv(tmp_path: Path) -> tuple[Path, Path]:
    python = real_venv(tmp_path / "venv")
    return python, site_packages(tmp_path / "venv")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / "src" / "zzoptional").mkdir(parents=True)
    (folder / "src" / "zzoptional" / "__init__.py").write_text("import os\n")
    return folder


def _doubts(python: Path, cwd: Path) -> tuple[str, ...]:
    # (as a console script of the environment runs: its bin folder first on the path)
    identify.clear_cache()
    return identify.python_path(str(python), {}, str(python.parent), frozenset(), str(cwd)).doubts


def _install_finder(site: Path, mapping: dict[str, str], namespaces: dict[str, list[str]]) -> None:
    editable = pytest.importorskip("setuptools.command.editable_wheel")
    (site / f"{FINDER}.py").write_text(editable._finder_template(FINDER, mapping, namespaces))
    (site / "__editable__.zzoptional-1.0.pth").write_text(f"import {FINDER}; {FINDER}.install()\n")


# --------------------------------------------------------------------- editable finders


def test_a_finder_mapping_a_name_to_a_folder_in_the_working_directory_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path
) -> None:
    python, site = venv
    _install_finder(site, {"zzoptional": str(workspace / "src" / "zzoptional")}, {})
    [doubt] = _doubts(python, workspace)
    assert f"maps zzoptional to {workspace / 'src' / 'zzoptional'}" in doubt, doubt
    assert "lies in the working directory" in doubt, doubt


def test_a_finder_mapping_a_name_through_a_link_into_the_working_directory_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    python, site = venv
    (tmp_path / "checkout").symlink_to(workspace / "src")
    _install_finder(site, {"zzoptional": str(tmp_path / "checkout" / "zzoptional")}, {})
    [doubt] = _doubts(python, workspace)
    assert "lies in the working directory" in doubt, doubt


def test_a_finder_mapping_namespace_packages_anywhere_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    # Its install() appends "<finder>.__path_hook__" to sys.path: a relative entry the
    # import system looks up in the child's working directory, where a folder of that
    # name answers any import.
    python, site = venv
    (tmp_path / "elsewhere" / "ns").mkdir(parents=True)
    _install_finder(
        site,
        {"zzoptional": str(tmp_path / "elsewhere")},
        {"zzoptional.core": [str(tmp_path / "elsewhere" / "ns")]},
    )
    [doubt] = _doubts(python, workspace)
    assert "maps namespace packages, and so adds a relative entry to sys.path" in doubt, doubt


@pytest.mark.parametrize("spelling", ["proc", "link to proc"])
def test_a_finder_mapping_a_name_through_proc_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path, spelling: str
) -> None:
    # /proc/self/cwd is the child's own working directory, whatever it is here
    python, site = venv
    folder = "/proc/self/cwd/src/zzoptional"
    if spelling == "link to proc":
        (tmp_path / "cwd").symlink_to("/proc/self/cwd")
        folder = str(tmp_path / "cwd" / "src" / "zzoptional")
    _install_finder(site, {"zzoptional": folder}, {})
    assert any("maps zzoptional to" in d for d in _doubts(python, workspace))


def test_a_module_beside_a_missing_mapped_folder_linked_into_the_workspace_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    # With no folder there, the finder loads zzoptional.py beside where it would be.
    python, site = venv
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / "zzoptional.py").symlink_to(
        workspace / "src" / "zzoptional" / "__init__.py"
    )
    _install_finder(site, {"zzoptional": str(tmp_path / "checkout" / "zzoptional")}, {})
    assert any("maps zzoptional to" in d for d in _doubts(python, workspace))


@pytest.mark.parametrize("form", ["a package of its name", "MAPPING.update", "MAPPING[...] =",
                                  "MAPPING bound twice", "an alias", "an argument"])  # fmt: skip
def test_a_finder_not_in_the_form_setuptools_writes_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path, form: str
) -> None:
    python, site = venv
    (tmp_path / "checkout" / "zzoptional").mkdir(parents=True)
    _install_finder(site, {"zzoptional": str(tmp_path / "checkout" / "zzoptional")}, {})
    planted = {"zzoptional": str(workspace / "src" / "zzoptional")}
    finder = site / f"{FINDER}.py"
    if form == "a package of its name":
        (site / FINDER).mkdir()
        (site / FINDER / "__init__.py").write_text(f"MAPPING = {planted!r}\ndef install(): pass\n")
    elif form == "MAPPING.update":
        finder.write_text(finder.read_text() + f"\nMAPPING.update({planted!r})\n")
    elif form == "MAPPING[...] =":
        finder.write_text(
            finder.read_text() + f"\nMAPPING['zzoptional'] = {planted['zzoptional']!r}\n"
        )
    elif form == "MAPPING bound twice":
        finder.write_text(finder.read_text() + f"\nMAPPING = {planted!r}\n")
    elif form == "an alias":
        finder.write_text(finder.read_text() + f"\nm = MAPPING\nm.update({planted!r})\n")
    else:
        finder.write_text(finder.read_text() + f"\ndict.update(MAPPING, {planted!r})\n")
    doubts = _doubts(python, workspace)
    assert any("runs code at start-up" in d for d in doubts), doubts


def test_a_finder_mapping_a_name_to_a_relative_folder_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path
) -> None:
    # (the finder takes it from the child's working directory at each import)
    python, site = venv
    _install_finder(site, {"zzoptional": "src/zzoptional"}, {})
    [doubt] = _doubts(python, workspace)
    assert "maps zzoptional to the relative folder 'src/zzoptional'" in doubt, doubt


def test_a_finder_mapping_a_name_to_the_users_own_checkout_is_understood(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    python, site = venv
    (tmp_path / "checkout" / "zzoptional").mkdir(parents=True)
    _install_finder(site, {"zzoptional": str(tmp_path / "checkout" / "zzoptional")}, {})
    assert _doubts(python, workspace) == ()


# --------------------------------------------------------------------- links


@pytest.mark.parametrize("entry", ["zzoptional", "zzoptional.py", "__pycache__"])
def test_a_site_folders_entry_that_links_into_the_working_directory_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path, entry: str
) -> None:
    # (flit install --symlink of the workspace's project; a module file linked; bytecode
    # CPython would take for the site folder's modules)
    python, site = venv
    target = workspace / "src" / entry
    if not target.exists():
        target.write_text("import os\n") if entry.endswith(".py") else target.mkdir()
    (site / entry).symlink_to(target)
    [doubt] = _doubts(python, workspace)
    assert f"{site / entry}, a site folder's entry, is a link into the working directory" in (
        doubt
    ), doubt


def test_an_entry_of_a_path_line_folder_that_links_into_the_working_directory_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    # The folder a .pth line adds lies outside the working directory; what it holds does not.
    python, site = venv
    project = tmp_path / "project"
    project.mkdir()
    (project / "zzoptional").symlink_to(workspace / "src" / "zzoptional")
    (site / "zzoptional.pth").write_text(f"{project}\n")
    doubts = _doubts(python, workspace)
    assert any(
        f"{project / 'zzoptional'}, an entry of a folder a .pth file adds, is a link into the" in d
        for d in doubts
    ), doubts


def test_a_site_folders_entry_that_links_through_proc_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path
) -> None:
    python, site = venv
    (site / "zzoptional").symlink_to("/proc/self/cwd/src/zzoptional")
    assert any(
        f"{site / 'zzoptional'}, a site folder's entry" in d for d in _doubts(python, workspace)
    )


def test_a_venvs_site_folder_or_pyvenv_cfg_through_proc_is_a_doubt(
    tmp_path: Path, workspace: Path
) -> None:
    # Here /proc/self/cwd is this process's folder; in the child, the workspace.
    python = real_venv(tmp_path / "venv")
    site = site_packages(tmp_path / "venv")
    here = Path.cwd()
    moved = tmp_path / "moved-site"
    site.rename(moved)
    site.symlink_to(Path("/proc/self/cwd") / os.path.relpath(moved, here))
    doubts = _doubts(python, workspace)
    assert any("leads into /proc" in d for d in doubts), doubts
    site.unlink()
    moved.rename(site)
    config = tmp_path / "venv" / "pyvenv.cfg"
    config.rename(tmp_path / "pyvenv.cfg")
    config.symlink_to(Path("/proc/self/cwd") / os.path.relpath(tmp_path / "pyvenv.cfg", here))
    doubts = _doubts(python, workspace)
    assert any("pyvenv.cfg leads into /proc" in d for d in doubts), doubts


def test_a_link_retargeted_between_two_judgements_of_one_process_is_seen(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    # site-packages/zzoptional -> /outside/hop/zzoptional; hop first leads elsewhere, then
    # (replaced by a link) into the workspace: the answer kept from the first must not stand.
    python, site = venv
    (tmp_path / "elsewhere" / "zzoptional").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "hop").symlink_to(tmp_path / "elsewhere")
    (site / "zzoptional").symlink_to(tmp_path / "outside" / "hop" / "zzoptional")
    assert _doubts(python, workspace) == ()
    (tmp_path / "outside" / "hop").unlink()
    (tmp_path / "outside" / "hop").symlink_to(workspace / "src")
    again = identify.python_path(
        str(python), {}, str(python.parent), frozenset(), str(workspace)
    ).doubts  # (the cache kept: no clear_cache)
    assert any("is a link into the working directory" in d for d in again), again


def test_a_site_folders_link_to_elsewhere_is_not_the_workspaces(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    python, site = venv
    (tmp_path / "store" / "zzoptional").mkdir(parents=True)
    (site / "zzoptional").symlink_to(tmp_path / "store" / "zzoptional")
    assert not any("working directory" in d for d in _doubts(python, workspace))


# --------------------------------------------------------------------- the standard library


def _venv_over_a_prefix(tmp_path: Path, version: str) -> tuple[Path, Path]:
    """A venv whose pyvenv.cfg home names a prefix of links to this interpreter's own files
    (outside the working directory); its python and the prefix."""
    python = real_venv(tmp_path / "venv")
    real_home = Path(os.path.realpath(python)).parent
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    for binary in real_home.iterdir():
        (prefix / "bin" / binary.name).symlink_to(binary)
    (prefix / "lib").mkdir()
    config = tmp_path / "venv" / "pyvenv.cfg"
    lines = [
        f"home = {prefix / 'bin'}" if line.startswith("home") else line
        for line in config.read_text().splitlines()
    ]
    config.write_text("\n".join(lines) + "\n")
    return python, prefix


def _stdlib_of_links(folder: Path, real: Path) -> None:
    folder.mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name not in ("site-packages", "__pycache__"):
            (folder / entry.name).symlink_to(entry)
    (folder / "site-packages").mkdir()


@pytest.fixture
def real_stdlib(venv: tuple[Path, Path]) -> tuple[Path, str]:
    python, _ = venv
    found = subprocess.run(
        [str(python), "-c", "import sys, sysconfig; print(sysconfig.get_paths()['stdlib']);"
         "print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return Path(found[0]), found[1]


def test_a_home_prefix_whose_standard_library_links_into_the_working_directory_is_a_doubt(
    tmp_path: Path, workspace: Path, real_stdlib: tuple[Path, str]
) -> None:
    stdlib, version = real_stdlib
    python, prefix = _venv_over_a_prefix(tmp_path / "agent", version)
    _stdlib_of_links(workspace / "stdlib", stdlib)
    (prefix / "lib" / f"python{version}").symlink_to(workspace / "stdlib")
    doubts = _doubts(python, workspace)
    assert any(
        f"standard library {prefix}/lib/python{version} lies in the working directory" in d
        for d in doubts
    ), doubts


def test_a_sitecustomize_of_the_standard_library_linked_into_the_working_directory_is_a_doubt(
    tmp_path: Path, workspace: Path, real_stdlib: tuple[Path, str]
) -> None:
    stdlib, version = real_stdlib
    python, prefix = _venv_over_a_prefix(tmp_path / "agent", version)
    own = prefix / "lib" / f"python{version}"
    _stdlib_of_links(own, stdlib)
    (workspace / "sc.py").write_text("import os\n")
    (own / "sitecustomize.py").symlink_to(workspace / "sc.py")
    doubts = _doubts(python, workspace)
    assert any(
        f"{own / 'sitecustomize.py'}, the standard library's entry, is a link into the "
        "working directory" in d
        for d in doubts
    ), doubts
    # the same prefix, its standard library all outside: nothing of the workspace's
    (own / "sitecustomize.py").unlink()
    assert not any("working directory" in d for d in _doubts(python, workspace))


# --------------------------------------------------------------------- what runs


def test_an_agent_importing_a_name_a_finder_maps_into_the_workspace_is_refused(
    world: World,
) -> None:
    # aider at its floor, an optional import of zzoptional in it, and the workspace's
    # project installed editable (finder form) in aider's own environment: refused, and the
    # workspace's code (which starts the old aider) never runs.
    new, old = world.new_aider(), world.old_aider()
    main = new.site / "aider" / "main.py"
    main.write_text("try:\n    import zzoptional\nexcept ImportError:\n    pass\n"
                    + main.read_text())  # fmt: skip
    workspace = world.root / "ws"
    (workspace / "src" / "zzoptional").mkdir(parents=True)
    (workspace / "src" / "zzoptional" / "__init__.py").write_text(
        f"import subprocess\nsubprocess.run([{str(old.prefix / 'bin' / 'aider')!r}, 'task'])\n"
    )
    _install_finder(new.site, {"zzoptional": str(workspace / "src" / "zzoptional")}, {})
    outcome = world.spawn(
        "aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"), cwd=workspace
    )
    world.assert_refused(outcome, old.marker, "maps zzoptional to")
    shutil.rmtree(workspace)


def test_a_link_reached_by_way_of_a_link_in_the_working_directory_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    # site-packages/zzoptional -> /outside/hop -> ws/lnk -> /elsewhere/zzoptional: the code
    # lies outside today, but the workspace may point ws/lnk at its own copy at any time.
    python, site = venv
    (tmp_path / "elsewhere" / "zzoptional").mkdir(parents=True)
    (workspace / "lnk").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "hop").symlink_to(workspace / "lnk")
    (site / "zzoptional").symlink_to(tmp_path / "outside" / "hop" / "zzoptional")
    doubts = _doubts(python, workspace)
    assert any(f"{site / 'zzoptional'}, a site folder's entry, is a link into" in d
               for d in doubts), doubts  # fmt: skip


def test_a_path_line_folder_reached_by_way_of_a_link_in_the_working_directory_is_a_doubt(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    python, site = venv
    (tmp_path / "elsewhere" / "src").mkdir(parents=True)
    (workspace / "lnk").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "hop").symlink_to(workspace / "lnk")
    (site / "project.pth").write_text(f"{tmp_path / 'hop' / 'src'}\n")
    doubts = _doubts(python, workspace)
    assert any("which a .pth file adds to the path, lies in the working directory" in d
               for d in doubts), doubts  # fmt: skip


def test_a_folder_on_a_links_way_replaced_by_a_link_between_two_judgements_is_seen(
    venv: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    # site-packages/zzoptional -> /outside/mid/zzoptional, mid a plain folder at the first
    # judgement, then replaced by a link into the workspace.
    python, site = venv
    (tmp_path / "outside" / "mid" / "zzoptional").mkdir(parents=True)
    (site / "zzoptional").symlink_to(tmp_path / "outside" / "mid" / "zzoptional")
    assert _doubts(python, workspace) == ()
    shutil.rmtree(tmp_path / "outside" / "mid")
    (tmp_path / "outside" / "mid").symlink_to(workspace / "src")
    again = identify.python_path(
        str(python), {}, str(python.parent), frozenset(), str(workspace)
    ).doubts  # (the cache kept: no clear_cache)
    assert any("is a link into the working directory" in d for d in again), again


def test_the_finders_candidates_beside_a_folder_carry_the_childs_extension_suffixes() -> None:
    # (a child of another version loads an extension module of its own suffix there)
    from floorguard._identify.python_imports import _finder_candidates

    candidates = _finder_candidates("/x/zzoptional", "3.12")
    assert "/x/zzoptional" in candidates and "/x/zzoptional.py" in candidates
    assert any(c.startswith("/x/zzoptional.cpython-312") for c in candidates), candidates
